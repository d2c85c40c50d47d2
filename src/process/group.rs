//! Every program kiln starts runs in a process group of its own and dies with kiln:
//!
//! - its group is new (`setpgid(0, 0)`), so one `killpg` reaches the compilers a build started,
//!   not only the build command (except what moved to a group of its own, as ninja's compilers
//!   do: the step's scope ends those), and a terminal's Ctrl-C reaches kiln alone, which decides;
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
//! - what a step leaves running ends with the step ([`scope`]): every command started inside a
//!   scope carries `KILN_SCOPE=<kiln pid>.<kiln start time>.<scope>` in its environment, which
//!   its children inherit, daemons that `setsid` out of the group included; when the scope ends
//!   (the step succeeded or failed) what is left of its groups and every process carrying its
//!   tag is killed. kiln is a child subreaper ([`become_subreaper`], `PR_SET_CHILD_SUBREAPER`),
//!   so orphans are re-parented to kiln rather than to init, and the ones it kills are reaped;
//!   after a `kill -9` of kiln the next kiln kills every process tagged by a kiln that is gone
//!   ([`reap_leftovers`]), daemons included.
//!
//! It also reads a group's CPU time from `/proc` (the stall limit of builds). It deliberately
//! ignores what the programs are and what an interrupted command must put back: the caller
//! holds a [`Hold`] and does that. A daemon that clears its environment and leaves its group is
//! only re-parented, not found.

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static HOLDS: AtomicUsize = AtomicUsize::new(0);
static PIPE: AtomicI32 = AtomicI32::new(-1);
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
static NEXT_SCOPE: AtomicU64 = AtomicU64::new(1);
static SCOPES: Mutex<Option<HashMap<u64, Vec<u32>>>> = Mutex::new(None);

thread_local! {
    /// The scope commands started on this thread belong to (0: none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// The environment variable that tags every process kiln starts with its scope.
pub const SCOPE_VAR: &str = "KILN_SCOPE";

/// Makes kiln a child subreaper (Linux): orphans of what it started become its children, not
/// init's, so what a step left running can be killed and reaped by kiln.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// What runs on this thread until the returned value is dropped belongs to one scope (a
/// step); dropping it kills what is left of the scope's processes (see the module doc).
#[must_use]
pub struct Scope {
    id: u64,
    outer: u64,
}

pub fn scope() -> Scope {
    let id = NEXT_SCOPE.fetch_add(1, Ordering::SeqCst);
    SCOPES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(id, Vec::new());
    let outer = CURRENT.with(|c| c.replace(id));
    Scope { id, outer }
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.outer));
        let groups = SCOPES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|m| m.remove(&self.id))
            .unwrap_or_default();
        end_scope(&tag_of(self.id), &groups);
    }
}

/// The scope of this thread (0: none), to carry to a thread that starts commands for it.
pub fn current() -> u64 {
    CURRENT.with(Cell::get)
}

/// Runs this thread's commands in scope `id` (from [`current`] on another thread) until dropped;
/// ending the scope stays its owner's job.
#[must_use]
pub struct Within(u64);

pub fn within(id: u64) -> Within {
    Within(CURRENT.with(|c| c.replace(id)))
}

impl Drop for Within {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// The tag of scope `id` of this kiln.
fn tag_of(id: u64) -> String {
    let me = std::process::id();
    format!("{me}.{}.{id}", start_time(me).unwrap_or(0))
}

/// The tag a command started now carries (`KILN_SCOPE`'s value).
pub(super) fn tag() -> String {
    tag_of(CURRENT.with(Cell::get))
}

/// Kills what is left of `groups` and every process tagged `tag`, and reaps those that were
/// re-parented to kiln.
fn end_scope(tag: &str, groups: &[u32]) {
    let me = std::process::id();
    let mut killed = Vec::new();
    // A few rounds: a member may fork while it is being killed.
    for _ in 0..5 {
        let mut found: Vec<u32> = groups.iter().flat_map(|&g| members(g)).map(|(p, _)| p).collect();
        found.extend(tagged(|t| t == tag));
        found.retain(|&p| p != me);
        if found.is_empty() {
            break;
        }
        for &pid in &found {
            kill_pid(pid);
        }
        killed.extend(found);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    killed.sort_unstable();
    killed.dedup();
    reap(&killed);
}

/// Waits for those of `pids` that are kiln's children now (orphans re-parented to it), for at
/// most a second each in all.
fn reap(pids: &[u32]) {
    let me = u64::from(std::process::id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    for &pid in pids {
        let Ok(p) = i32::try_from(pid) else { continue };
        loop {
            let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| t.rsplit(')').next()?.split_whitespace().nth(1)?.parse::<u64>().ok());
            if parent != Some(me) {
                break;
            }
            let mut status = 0;
            // SAFETY: waits only for this one pid, which is kiln's child and was killed.
            let r = unsafe { libc::waitpid(p, &mut status, libc::WNOHANG) };
            if r != 0 || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// Every live process whose `KILN_SCOPE` satisfies `wanted`.
fn tagged(wanted: impl Fn(&str) -> bool) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let key = format!("{SCOPE_VAR}=");
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            env.split(|b| *b == 0)
                .filter_map(|v| v.strip_prefix(key.as_bytes()))
                .any(|v| std::str::from_utf8(v).is_ok_and(&wanted))
        })
        .collect()
}

fn kill_pid(pid: u32) {
    if let Ok(p) = i32::try_from(pid)
        && p > 1
    {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(p, libc::SIGKILL);
        }
    }
}

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
    let current = CURRENT.with(Cell::get);
    if current != 0
        && let Some(groups) = SCOPES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|m| m.get_mut(&current))
    {
        groups.extend_from_slice(pids);
    }
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
pub(super) fn stat(pid: u32) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    Some(fields.map(|f| f.parse().unwrap_or(0)).collect())
}

/// When the process started (clock ticks since boot): with the pid, who it is.
pub fn start_time(pid: u32) -> Option<u64> {
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
    // What escaped its group (a `setsid` daemon) still carries the tag of the kiln that
    // started it.
    let dead = |tag: &str| {
        let mut f = tag.split('.').map(|x| x.parse::<u64>().ok());
        match (f.next().flatten(), f.next().flatten()) {
            (Some(pid), Some(start)) => u32::try_from(pid).map_or(true, |p| start_time(p) != Some(start)),
            _ => false,
        }
    };
    let me = std::process::id();
    for pid in tagged(dead).into_iter().filter(|&p| p != me) {
        kill_pid(pid);
        killed += 1;
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
