//! Who compiles now, and who waits: one small JSON file per build (`slots.json` beside the
//! gate's config), read and written under an exclusive lock on `slots.lock`, shared by every
//! gate process of that build. A unit is let in when it is the longest-waiting one and its
//! estimate fits beside the running units' within the build's limit, or when nothing runs (a
//! unit bigger than the limit still builds, alone). First come, first served: a big unit is
//! never passed over for ever by small ones.
//!
//! A process that died without leaving (killed with its build, or by the OOM killer) is dropped
//! by the next one that looks (each entry holds its process's start time, so a reused pid is
//! not it), so nothing waits for a unit that is gone. The table is written back only when it
//! changed. It deliberately ignores what the units are and how their estimates were made
//! ([`super`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The table's file in the gate's directory.
pub const TABLE: &str = "slots.json";

/// How often a waiting unit looks again.
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct Table {
    next: u64,
    running: Vec<Entry>,
    waiting: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    pid: u32,
    /// The process's start time (clock ticks since boot): with the pid, who it is.
    started: u64,
    ticket: u64,
    unit: String,
    bytes: u64,
}

/// What a unit waits for, told once when it starts waiting.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub unit: String,
    pub bytes: u64,
    pub limit: u64,
    /// The running units' estimates, summed.
    pub in_use: u64,
    pub running: usize,
}

/// A unit let in: it leaves the table when dropped.
pub struct Slot {
    dir: PathBuf,
    ticket: u64,
}

/// Waits until `unit` (estimated at `bytes`) may compile within `limit`, then holds its slot;
/// `on_wait` hears once that it waits, and for what.
pub fn enter(
    dir: &Path,
    unit: &str,
    bytes: u64,
    limit: u64,
    on_wait: &mut dyn FnMut(&Waiting),
) -> std::io::Result<Slot> {
    let pid = std::process::id();
    let started = crate::process::group::start_time(pid).unwrap_or(0);
    let mut ticket = None;
    let mut said = false;
    loop {
        let admitted = with_table(dir, |t| {
            let mine = *ticket.get_or_insert_with(|| {
                t.next += 1;
                t.waiting.push(Entry {
                    pid,
                    started,
                    ticket: t.next,
                    unit: unit.to_string(),
                    bytes,
                });
                t.next
            });
            let first = t.waiting.iter().map(|e| e.ticket).min() == Some(mine);
            let in_use: u64 = t.running.iter().map(|e| e.bytes).sum();
            // The longest-waiting unit only; alone it always fits.
            if first && (t.running.is_empty() || in_use.saturating_add(bytes) <= limit) {
                let at = t.waiting.iter().position(|e| e.ticket == mine);
                let me = at.map(|i| t.waiting.remove(i));
                t.running.extend(me);
                return None;
            }
            Some(Waiting {
                unit: unit.to_string(),
                bytes,
                limit,
                in_use,
                running: t.running.len(),
            })
        })?;
        match admitted {
            None => {
                return Ok(Slot {
                    dir: dir.to_path_buf(),
                    ticket: ticket.unwrap_or_default(),
                });
            }
            Some(w) => {
                if !std::mem::replace(&mut said, true) {
                    on_wait(&w);
                }
                std::thread::sleep(POLL);
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let ticket = self.ticket;
        let _ = with_table(&self.dir, |t| t.running.retain(|e| e.ticket != ticket));
    }
}

/// Runs `f` on the table under the lock, dropping processes that are gone first, and writes it
/// back.
fn with_table<T>(dir: &Path, f: impl FnOnce(&mut Table) -> T) -> std::io::Result<T> {
    let lock = File::create(dir.join("slots.lock"))?;
    lock.lock()?;
    let path = dir.join(TABLE);
    let mut table: Table = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let before = serde_json::to_vec(&table).map_err(std::io::Error::other)?;
    table.running.retain(alive);
    table.waiting.retain(alive);
    let out = f(&mut table);
    let bytes = serde_json::to_vec(&table).map_err(std::io::Error::other)?;
    if bytes != before {
        let tmp = dir.join("slots.json.tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(out)
}

/// The entry's process still runs: its pid has the start time it had.
fn alive(e: &Entry) -> bool {
    crate::process::group::start_time(e.pid) == Some(e.started)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns once `n` units wait in the table of `dir`.
    fn waiting(dir: &Path, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while with_table(dir, |t| t.waiting.len()).unwrap() < n {
            assert!(std::time::Instant::now() < deadline, "fewer than {n} units wait");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn units_enter_in_turn_within_the_limit_and_a_lone_one_always_does() {
        let dir = tempfile::tempdir().unwrap();
        let mut told = Vec::new();
        let a = enter(dir.path(), "a.cu", 6, 10, &mut |w| told.push(w.clone())).unwrap();
        // Nothing else runs: a unit over the limit still enters, alone.
        drop(a);
        let big = enter(dir.path(), "big.cu", 50, 10, &mut |w| told.push(w.clone())).unwrap();
        drop(big);
        assert!(told.is_empty(), "{told:?}");
        // 6 of 10 in use: a unit of 5 waits until the first leaves (from another thread).
        let a = enter(dir.path(), "a.cu", 6, 10, &mut |_| {}).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let mut said = None;
            let slot = enter(&d, "b.cu", 5, 10, &mut |w| said = Some(w.clone())).unwrap();
            tx.send(said).unwrap();
            drop(slot);
        });
        waiting(dir.path(), 1);
        std::thread::sleep(Duration::from_millis(100));
        assert!(rx.try_recv().is_err(), "b entered beside a: 11 > 10");
        drop(a);
        let said = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("b entered once a left")
            .unwrap();
        waiter.join().unwrap();
        assert_eq!(
            (said.unit.as_str(), said.bytes, said.in_use, said.running),
            ("b.cu", 5, 6, 1)
        );
    }

    #[test]
    fn a_unit_whose_process_is_gone_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        // A process that ended while it held 9 of 10.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        with_table(dir.path(), |t| {
            t.next = 1;
            t.running.push(Entry {
                pid,
                started: 1,
                ticket: 1,
                unit: "dead.cu".into(),
                bytes: 9,
            });
        })
        .unwrap();
        let mut told = Vec::new();
        let live = enter(dir.path(), "x.cu", 5, 10, &mut |w| told.push(w.clone())).unwrap();
        assert!(told.is_empty(), "waited for a unit that is gone: {told:?}");
        drop(live);
        let left = with_table(dir.path(), |t| (t.running.len(), t.waiting.len())).unwrap();
        assert_eq!(left, (0, 0));
        // A live pid with another start time is somebody else: its entry is gone too.
        let me = std::process::id();
        with_table(dir.path(), |t| {
            t.running.push(Entry {
                pid: me,
                started: 0,
                ticket: 7,
                unit: "old.cu".into(),
                bytes: 9,
            });
        })
        .unwrap();
        let live = enter(dir.path(), "y.cu", 5, 10, &mut |w| {
            panic!("waited for a reused pid: {w:?}")
        })
        .unwrap();
        drop(live);
    }

    #[test]
    fn a_big_unit_that_waits_first_is_never_passed_over_by_smaller_ones() {
        let dir = tempfile::tempdir().unwrap();
        let a = enter(dir.path(), "a.cu", 6, 10, &mut |_| {}).unwrap();
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let start = |unit: &'static str, bytes: u64, hold: Duration| {
            let (d, order) = (dir.path().to_path_buf(), order.clone());
            std::thread::spawn(move || {
                let slot = enter(&d, unit, bytes, 10, &mut |_| {}).unwrap();
                order.lock().unwrap().push(unit);
                std::thread::sleep(hold);
                drop(slot);
            })
        };
        // The big one (8 beside 6: over 10) waits first; the small one (1 beside 6 would fit)
        // comes after it and must not go first.
        let big = start("big.cu", 8, Duration::from_millis(300));
        waiting(dir.path(), 1);
        let small = start("small.cu", 1, Duration::ZERO);
        waiting(dir.path(), 2);
        assert!(order.lock().unwrap().is_empty(), "{:?}", order.lock().unwrap());
        drop(a);
        big.join().unwrap();
        small.join().unwrap();
        assert_eq!(*order.lock().unwrap(), ["big.cu", "small.cu"]);
    }
}
