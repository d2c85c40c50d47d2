//! Every program kiln starts runs in a process group of its own and dies with kiln:
//!
//! - its group is new (`setpgid(0, 0)`), so one `killpg` reaches the compilers a build started,
//!   not only the build command, and a terminal's Ctrl-C reaches kiln alone, which decides;
//! - the group's leader gets `PR_SET_PDEATHSIG = SIGKILL`, so a `kill -9` of kiln kills it at
//!   once (pip and uv in particular: an orphaned install never goes on alone);
//! - each live group is written down (`<dir>/<kiln pid>-<pgid>`, with both start times read from
//!   `/proc`), so what survived a kiln killed with `kill -9` (the grandchildren of a build) is
//!   killed by the next kiln that starts ([`reap_leftovers`]): a group id cannot be handed out
//!   again while any member of the group lives, and a leader with another start time is
//!   somebody else's;
//! - on SIGINT or SIGTERM ([`on_interrupt`]) every live group is killed; kiln exits 130 at once
//!   unless code that must put something back holds a [`Hold`], in which case that code finishes
//!   (only commands marked [`super::Cmd::restoring`] may still start) and the command exits 130
//!   when it returns (see [`interrupted`]).
//!
//! It also reads a group's CPU time from `/proc` (the stall limit of builds). It deliberately
//! ignores what the programs are and what an interrupted command must put back: the caller
//! holds a [`Hold`] and does that.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static HOLDS: AtomicUsize = AtomicUsize::new(0);
static PIPE: AtomicI32 = AtomicI32::new(-1);
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The exit status of a command ended by SIGINT or SIGTERM (128 + SIGINT, as shells say).
pub const INTERRUPTED_EXIT: u8 = 130;

/// Whether SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// While held, an interrupt kills the live groups but does not end kiln: the holder puts back
/// what it changed and the command exits 130 when it returns.
#[must_use]
pub struct Hold(());

pub fn hold() -> Hold {
    HOLDS.fetch_add(1, Ordering::SeqCst);
    Hold(())
}

impl Drop for Hold {
    fn drop(&mut self) {
        HOLDS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where live groups are written down, so that the next kiln can kill what survives a
/// `kill -9` of this one.
pub fn record_in(dir: &Path) {
    let _ = std::fs::create_dir_all(dir);
    *DIR.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_path_buf());
}

/// Makes a command start its own group, whose leader dies with kiln.
pub(super) fn configure(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is always safe.
    let parent = unsafe { libc::getpid() };
    cmd.process_group(0);
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // kiln died between fork and prctl: the signal will never come.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Notes the groups led by `pids` (just started) as live; kills them at once when an interrupt
/// came meanwhile, unless they put something back.
pub(super) fn started(pids: &[u32], restoring: bool) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.extend_from_slice(pids);
    if let Some(dir) = DIR.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let me = std::process::id();
        let mine = start_time(me).unwrap_or(0);
        for &pid in pids {
            let text = format!("{mine} {}\n", start_time(pid).unwrap_or(0));
            let _ = std::fs::write(dir.join(format!("{me}-{pid}")), text);
        }
    }
    drop(live);
    if interrupted() && !restoring {
        pids.iter().for_each(|&p| kill_group(p));
    }
}

/// The groups led by `pids` have been waited for.
pub(super) fn ended(pids: &[u32]) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.retain(|p| !pids.contains(p));
    if let Some(dir) = DIR.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let me = std::process::id();
        for pid in pids {
            let _ = std::fs::remove_file(dir.join(format!("{me}-{pid}")));
        }
    }
}

/// Whether a command may start now: after an interrupt only those that put something back.
pub(super) fn may_start(restoring: bool) -> bool {
    restoring || !interrupted()
}

/// SIGKILL to every member of group `pgid` (the whole build: make, ninja, the compilers).
pub fn kill_group(pgid: u32) {
    if let Ok(g) = i32::try_from(pgid)
        && g > 1
    {
        // SAFETY: killpg with a positive group id only sends a signal.
        unsafe {
            libc::killpg(g, libc::SIGKILL);
        }
    }
}

fn kill_live() {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    live.into_iter().for_each(kill_group);
}

extern "C" fn on_signal(sig: libc::c_int) {
    let byte = sig as u8;
    let fd = PIPE.load(Ordering::SeqCst);
    // SAFETY: write(2) is async-signal-safe; a failed write only loses this one signal.
    unsafe {
        libc::write(fd, (&byte as *const u8).cast(), 1);
    }
}

/// Catches SIGINT and SIGTERM: the first kills every live group and, unless a [`Hold`] is held,
/// ends kiln with status 130; a second ends kiln at once (an unfinished install is then put back
/// by the next kiln, from its journal).
pub fn on_interrupt() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    PIPE.store(fds[1], Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only writes one byte to a pipe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let read_fd = fds[0];
    std::thread::spawn(move || {
        loop {
            let mut b = 0u8;
            // SAFETY: reads one byte into `b`.
            let n = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
            if n <= 0 {
                return;
            }
            let again = INTERRUPTED.swap(true, Ordering::SeqCst);
            kill_live();
            if again || HOLDS.load(Ordering::SeqCst) == 0 {
                std::process::exit(i32::from(INTERRUPTED_EXIT));
            }
        }
    });
}

/// The fields of `/proc/PID/stat` after the state: index 0 is field 4 (ppid), 1 the group.
/// `None` for a process that is gone, and for a zombie (killed; only its status is left).
fn stat(pid: u32) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    Some(fields.map(|f| f.parse().unwrap_or(0)).collect())
}

/// When the process started (clock ticks since boot): with the pid, who it is.
fn start_time(pid: u32) -> Option<u64> {
    stat(pid)?.get(18).copied()
}

/// Every process whose group is `pgid`, with its stat fields (`wait` sums their CPU time and
/// resident memory).
pub(super) fn members(pgid: u32) -> Vec<(u32, Vec<u64>)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .filter(|(_, f)| f.get(1).copied() == Some(u64::from(pgid)))
        .collect()
}

/// CPU time (user + system, with the children each member has waited for) of every process in
/// group `pgid`, in clock ticks; what a build that compiles has used so far.
pub fn cpu_ticks(pgid: u32) -> u64 {
    members(pgid)
        .iter()
        .map(|(_, f)| f.get(10..14).map_or(0, |t| t.iter().sum::<u64>()))
        .sum()
}

/// Kills what is left of the groups that kilns no longer running wrote down in `dir`; returns
/// how many processes were killed.
pub fn reap_leftovers(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut killed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((Ok(kiln), Ok(pgid))) = name.split_once('-').map(|(a, b)| (a.parse::<u32>(), b.parse::<u32>())) else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut times = text.split_whitespace().map(|t| t.parse::<u64>().unwrap_or(0));
        let (kiln_start, leader_start) = (times.next().unwrap_or(0), times.next().unwrap_or(0));
        if start_time(kiln).is_some_and(|t| t == kiln_start) {
            continue; // that kiln is still running: its groups are its own
        }
        // A leader that lives with another start time leads somebody else's group.
        let leader = start_time(pgid);
        if leader.is_none() || leader == Some(leader_start) {
            let left = members(pgid);
            killed += left.len();
            if !left.is_empty() {
                kill_group(pgid);
            }
        }
        let _ = std::fs::remove_file(e.path());
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_left_by_a_dead_kiln_is_killed_and_one_of_a_live_kiln_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sh");
        child.args(["-c", "sleep 30 & sleep 30; wait"]);
        configure(&mut child);
        let mut child = child.spawn().unwrap();
        let pgid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(members(pgid).len(), 3);
        let leader = start_time(pgid).unwrap();
        // Written down by this (live) process: left alone.
        let me = std::process::id();
        let live = dir.path().join(format!("{me}-{pgid}"));
        std::fs::write(&live, format!("{} {leader}\n", start_time(me).unwrap())).unwrap();
        assert_eq!(reap_leftovers(dir.path()), 0);
        assert!(live.exists());
        // Written down by a kiln that is gone (its start time differs): killed.
        std::fs::write(&live, format!("1 {leader}\n")).unwrap();
        assert_eq!(reap_leftovers(dir.path()), 3);
        assert!(!live.exists());
        let _ = child.wait();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(members(pgid).is_empty());
    }
}
