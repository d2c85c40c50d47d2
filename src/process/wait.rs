//! Waiting for a started program within its limits: an overall time limit, and for long builds a
//! stall limit, which fires only when the program wrote nothing to its log and its whole
//! process group used no CPU time (read from `/proc`) for that long: a compile that prints
//! nothing for an hour but keeps a core busy is not stalled, a build blocked on a lock or a
//! network read is. Either limit kills the whole process group.
//!
//! Without a stall limit it does not poll: duct waits on `SIGCHLD`. With one it looks once a
//! second (or four times per limit, for limits under four seconds). It deliberately ignores
//! what the program is.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Exit, group};

/// How long a killed program gets to be reaped before kiln stops waiting for it.
const REAP: Duration = Duration::from_secs(5);

/// Marks the groups of `.0` as ended when dropped (however the wait ends).
pub(super) struct Ended(pub Vec<u32>);

impl Drop for Ended {
    fn drop(&mut self) {
        group::ended(&self.0);
    }
}

/// Waits for `handle`, killing its group once `limit` has passed or once the log given with
/// `stall` and the group's CPU time have not moved for that long. `restoring`: see
/// [`super::Cmd::restoring`].
pub(super) fn wait<'h>(
    handle: &'h duct::Handle,
    limit: Option<Duration>,
    stall: Option<(Duration, &Path)>,
    restoring: bool,
) -> (Exit, Option<&'h std::process::Output>) {
    let pids = handle.pids();
    group::started(&pids, restoring);
    let _ended = Ended(pids.clone());
    let kill = |exit: Exit| {
        pids.iter().for_each(|&p| group::kill_group(p));
        let _ = handle.kill();
        let _ = handle.wait_timeout(REAP);
        (exit, None)
    };
    let Some((stall, log)) = stall else {
        let done = match limit {
            None => handle.wait().map(Some),
            Some(d) => handle.wait_timeout(d),
        };
        return match (done, limit) {
            (Ok(Some(out)), _) => (Exit::of(out.status), Some(out)),
            (Ok(None), Some(d)) => kill(Exit::TimedOut(d)),
            (Ok(None), None) => (Exit::NoStatus("lost the process".into()), None),
            (Err(e), _) => (Exit::NoStatus(format!("lost the process: {e}")), None),
        };
    };
    let start = Instant::now();
    let slice = (stall / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let progress = || {
        let size = std::fs::metadata(log).map_or(0, |m| m.len());
        let cpu: u64 = pids.iter().map(|&p| group::cpu_ticks(p)).sum();
        (size, cpu)
    };
    let mut seen = progress();
    let mut moved = Instant::now();
    loop {
        match handle.wait_timeout(slice) {
            Ok(Some(out)) => return (Exit::of(out.status), Some(out)),
            Ok(None) => {}
            Err(e) => return (Exit::NoStatus(format!("lost the process: {e}")), None),
        }
        if let Some(d) = limit.filter(|d| start.elapsed() >= *d) {
            return kill(Exit::TimedOut(d));
        }
        let now = progress();
        if now != seen {
            seen = now;
            moved = Instant::now();
        } else if moved.elapsed() >= stall {
            return kill(Exit::Stalled(stall));
        }
    }
}
