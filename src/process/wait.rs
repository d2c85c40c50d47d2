//! Waiting for a started program within its limits: an overall time limit, and for long builds a
//! stall limit, which fires only when the program wrote nothing to its log and its whole
//! process group, with every descendant (ninja starts each compiler in a group of its own),
//! used no CPU time (read from `/proc`) for that long: a compile that prints nothing for an
//! hour but keeps a core busy is not stalled, a build blocked on a lock or a network read is.
//! Either limit kills the whole process group (what runs in groups of its own, such as ninja's
//! compilers, ends with the step's scope: [`super::group::scope`]). Asked to, it also samples the resident memory of
//! the group and its descendants (the sum of their RSS from `/proc/PID/stat`, four times a
//! second at first, then once a second) and keeps the peak ([`Usage`]): what a build's compile
//! jobs really took.
//!
//! Without a stall limit or a [`Usage`] it does not poll: duct waits on `SIGCHLD`. With a stall
//! limit it looks once a second (or four times per limit, for limits under four seconds). It
//! deliberately ignores what the program is; the summed RSS counts pages shared between members
//! once per member, so it errs high.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Exit, group};

/// How long a killed program gets to be reaped before kiln stops waiting for it.
const REAP: Duration = Duration::from_secs(5);

/// How often the group's memory is sampled: four times a second for the first ten seconds (a
/// short build's peak is brief), then once a second (a sample walks all of `/proc`).
const SAMPLE: Duration = Duration::from_millis(250);
const SAMPLE_LATER: Duration = Duration::from_secs(1);
const SAMPLE_FAST_FOR: Duration = Duration::from_secs(10);

/// What a program's process group took while kiln waited for it: the peak of its members'
/// resident memory summed, in bytes. Shared between the waiting thread and whoever watches.
#[derive(Debug, Default)]
pub struct Usage {
    peak: AtomicU64,
    now: AtomicU64,
}

impl Usage {
    /// The highest sample so far (0 before the first).
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// The latest sample.
    pub fn current(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    fn record(&self, rss: u64) {
        self.now.store(rss, Ordering::Relaxed);
        self.peak.fetch_max(rss, Ordering::Relaxed);
    }
}

/// Marks the groups of `.0` as ended when dropped (however the wait ends).
pub(super) struct Ended(pub Vec<u32>);

impl Drop for Ended {
    fn drop(&mut self) {
        group::ended(&self.0);
    }
}

/// CPU time (clock ticks) and resident memory (bytes) of every process in the groups `pgids`
/// and of their descendants in groups of their own (ninja's compilers).
fn sample(pgids: &[u32]) -> (u64, u64) {
    let page = super::tree::page_size();
    let (mut cpu, mut rss) = (0, 0);
    for f in super::tree::groups_with_descendants(pgids) {
        // Index 0 is field 4 of /proc/PID/stat: utime..cstime are fields 14-17, rss 24.
        cpu += f.get(10..14).map_or(0, |t| t.iter().sum::<u64>());
        rss += f.get(20).copied().unwrap_or(0) * page;
    }
    (cpu, rss)
}

/// Waits for `handle`, killing its group once `limit` has passed or once the log given with
/// `stall` and the group's CPU time have not moved for that long; with `usage`, sampling the
/// group's memory into it. `restoring`: see [`super::Cmd::restoring`].
pub(super) fn wait<'h>(
    handle: &'h duct::Handle,
    limit: Option<Duration>,
    stall: Option<(Duration, &Path)>,
    restoring: bool,
    usage: Option<&Usage>,
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
    if stall.is_none() && usage.is_none() {
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
    }
    let start = Instant::now();
    let stall_slice = stall.map(|(d, _)| (d / 4).clamp(Duration::from_millis(50), Duration::from_secs(1)));
    let slice = || {
        let sample = usage.map(|_| {
            if start.elapsed() < SAMPLE_FAST_FOR {
                SAMPLE
            } else {
                SAMPLE_LATER
            }
        });
        match (stall_slice, sample) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(SAMPLE_LATER),
        }
    };
    let progress = || {
        let size = stall.map_or(0, |(_, log)| std::fs::metadata(log).map_or(0, |m| m.len()));
        let (cpu, rss) = sample(&pids);
        if let Some(u) = usage {
            u.record(rss);
        }
        (size, cpu)
    };
    let mut seen = progress();
    let mut moved = Instant::now();
    loop {
        match handle.wait_timeout(slice()) {
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
        } else if let Some((stall, _)) = stall.filter(|(d, _)| moved.elapsed() >= *d) {
            return kill(Exit::Stalled(stall));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::Cmd;
    use super::Usage;

    /// The peak the wait sampled for a command whose child holds 200 MiB for a second, started
    /// with `how` (more arguments of `subprocess.run`).
    fn peak_with_a_child(how: &str) -> Arc<Usage> {
        let dir = tempfile::tempdir().unwrap();
        let usage = Arc::new(Usage::default());
        let code = format!(
            "import os, subprocess, sys; subprocess.run([sys.executable, '-c', \
             'import time; b = b\"1\" * (200 << 20); time.sleep(1)'], {how}check=True)"
        );
        Cmd::new("python3")
            .args(["-c", &code])
            .measure(usage.clone())
            .run_logged(&dir.path().join("log"))
            .unwrap();
        usage
    }

    #[test]
    fn the_peak_memory_of_the_whole_group_is_sampled() {
        // A child of the command (in its group) holds 200 MiB; the command itself holds little.
        let usage = peak_with_a_child("");
        assert!(usage.peak() >= 200 << 20, "peak {}", usage.peak());
        assert!(usage.peak() < 2000 << 20, "peak {}", usage.peak());
        assert!(usage.current() <= usage.peak());
    }

    #[test]
    fn a_child_in_a_group_of_its_own_counts_as_ninja_starts_compilers() {
        // The child moves to a process group of its own, as ninja starts every compiler.
        let usage = peak_with_a_child("preexec_fn=os.setpgrp, ");
        assert!(usage.peak() >= 200 << 20, "peak {}", usage.peak());
    }
}
