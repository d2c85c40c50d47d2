//! Progress for `kiln install`: an indicatif spinner per step under way (several when builds run
//! side by side) on a terminal, plain lines on stderr otherwise (CI logs, `--no-progress`; each
//! line names its step), nothing under `--quiet`. Once a build's compile says how far it is
//! (ninja's `[n/N]`), its spinner becomes a bar with the units done and an estimate of the time
//! left; plain output prints that at most every [`PLAIN_EVERY`] and when the compile completes.
//! The finished line gives the peak memory a build's wheel command took, and its jobs.
//!
//! The estimate is the rate since the first unit the build reported, applied to the units left:
//! builds whose units differ in cost (a few huge CUDA files among small ones) make it rough.

use crate::process::secrets::mask_urls;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::apply::{Outcome, Phase, Reporter};
use crate::resolve::Step;

/// How often plain output repeats a build's progress.
pub const PLAIN_EVERY: Duration = Duration::from_secs(30);

pub struct Progress {
    multi: MultiProgress,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
    /// Per step: its compile progress so far, and the peak memory its wheel command took.
    tracks: Mutex<BTreeMap<String, Track>>,
    fancy: bool,
    quiet: bool,
}

/// What one step's compile has reported.
#[derive(Debug, Clone, Default)]
struct Track {
    /// When the first unit was reported, and how many were done then.
    first: Option<(Instant, u64)>,
    /// When plain output last printed this step's progress.
    printed: Option<Instant>,
    /// Peak memory (bytes) and jobs of its last wheel command.
    measured: Option<(u64, usize)>,
}

/// Seconds left at the rate since the first report: `done_since` units in `elapsed` seconds,
/// `left` to go. `None` before a rate can be known.
pub fn eta_seconds(elapsed: f64, done_since: u64, left: u64) -> Option<f64> {
    (done_since > 0 && elapsed > 0.0).then(|| elapsed / done_since as f64 * left as f64)
}

/// `45 s`, `3 min`, `1 h 20 min`.
pub fn duration_text(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", (s + 30) / 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// `1 file compiled`, `12 files compiled`.
fn files_compiled(n: u64) -> String {
    format!("{n} file{} compiled", if n == 1 { "" } else { "s" })
}

impl Progress {
    pub fn new(plain: bool, quiet: bool) -> Progress {
        Progress {
            multi: MultiProgress::new(),
            bars: Mutex::new(BTreeMap::new()),
            tracks: Mutex::new(BTreeMap::new()),
            fancy: !plain && !quiet && std::io::stderr().is_terminal(),
            quiet,
        }
    }

    fn spinner_style() -> ProgressStyle {
        ProgressStyle::with_template("{spinner} {prefix:.bold} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
    }

    fn bar_style() -> ProgressStyle {
        ProgressStyle::with_template("{spinner} {prefix:.bold} [{bar:24}] {pos}/{len} {msg} [{elapsed}, ~{eta} left]")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| Self::spinner_style())
    }

    fn with_bar(&self, step: &Step, f: impl FnOnce(&ProgressBar)) {
        if let Ok(b) = self.bars.lock()
            && let Some(bar) = b.get(&step.name)
        {
            f(bar);
        }
    }
}

impl Reporter for Progress {
    fn step_started(&self, step: &Step) {
        if self.quiet || !step.action.changes() {
            return;
        }
        if self.fancy {
            let bar = self.multi.add(ProgressBar::new_spinner());
            bar.set_style(Self::spinner_style());
            bar.set_prefix(format!("{} {}", step.action.as_str(), step.name));
            bar.enable_steady_tick(Duration::from_millis(120));
            if let Ok(mut b) = self.bars.lock() {
                b.insert(step.name.clone(), bar);
            }
        } else {
            eprintln!("kiln: {} {}", step.action.as_str(), step.name);
        }
    }

    fn phase(&self, step: &Step, phase: Phase, detail: &str) {
        if self.quiet {
            return;
        }
        if self.fancy {
            self.with_bar(step, |bar| {
                bar.set_style(Self::spinner_style());
                bar.set_message(format!("{}: {}", phase.as_str(), mask_urls(detail)));
            });
        } else {
            eprintln!("kiln:   {}: {}: {}", step.name, phase.as_str(), mask_urls(detail));
        }
    }

    /// A warning is printed even under --quiet: it says the run was not what was asked.
    fn warning(&self, step: &Step, text: &str) {
        let line = format!("warning: {}: {}", step.name, mask_urls(text));
        if self.fancy {
            self.multi.suspend(|| eprintln!("{line}"));
        } else {
            eprintln!("{line}");
        }
    }

    /// The step's spinner says how much of its download has arrived (plain output does not: the
    /// fetch phase line already says what is downloading).
    fn transfer(&self, step: &Step, done: u64, total: Option<u64>) {
        if self.quiet || !self.fancy {
            return;
        }
        self.with_bar(step, |bar| {
            let mb = |n: u64| n as f64 / 1e6;
            bar.set_message(match total {
                Some(t) if t > 0 => format!("fetch: {:.1} of {:.1} MB ({}%)", mb(done), mb(t), done * 100 / t),
                _ => format!("fetch: {:.1} MB", mb(done)),
            });
        });
    }

    fn progress(&self, step: &Step, done: u64, total: Option<u64>) {
        if self.quiet {
            return;
        }
        let now = Instant::now();
        let Ok(mut tracks) = self.tracks.lock() else { return };
        let track = tracks.entry(step.name.clone()).or_default();
        let (since, first_done) = *track.first.get_or_insert((now, done));
        if self.fancy {
            self.with_bar(step, |bar| match total {
                Some(t) => {
                    bar.set_style(Self::bar_style());
                    bar.set_length(t);
                    bar.set_position(done);
                    bar.set_message("wheel: compiling");
                }
                None => bar.set_message(format!("wheel: {}", files_compiled(done))),
            });
            return;
        }
        let complete = total.is_some_and(|t| done >= t);
        if !complete && track.printed.is_some_and(|p| now - p < PLAIN_EVERY) {
            return;
        }
        track.printed = Some(now);
        let line = match total {
            Some(t) => {
                let left = eta_seconds(
                    (now - since).as_secs_f64(),
                    done.saturating_sub(first_done),
                    t.saturating_sub(done),
                );
                let left = left
                    .filter(|_| !complete)
                    .map(|s| format!(", about {} left", duration_text(s)));
                format!("{done}/{t} compiled{}", left.unwrap_or_default())
            }
            None => files_compiled(done),
        };
        eprintln!("kiln:   {}: wheel: {line}", step.name);
    }

    fn measured(&self, step: &Step, peak: u64, jobs: usize) {
        if let Ok(mut tracks) = self.tracks.lock() {
            tracks.entry(step.name.clone()).or_default().measured = Some((peak, jobs));
        }
    }

    fn step_finished(&self, step: &Step, outcome: &Outcome) {
        if let Ok(mut b) = self.bars.lock()
            && let Some(bar) = b.remove(&step.name)
        {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        let track = self.tracks.lock().ok().and_then(|mut t| t.remove(&step.name));
        if self.quiet || !step.action.changes() {
            return;
        }
        let memory = track
            .and_then(|t| t.measured)
            .map(|(peak, jobs)| {
                let s = if jobs == 1 { "" } else { "s" };
                format!(", peak memory {} with {jobs} job{s}", crate::apply::memory::human(peak))
            })
            .unwrap_or_default();
        let line = format!(
            "kiln: {} {} {} ({:.1} s{memory})",
            outcome.result.as_str(),
            step.action.as_str(),
            step.name,
            outcome.seconds
        );
        // Above the spinners of the steps still under way, not through them.
        if !self.fancy || self.multi.println(&line).is_err() {
            eprintln!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_is_the_rate_so_far_applied_to_what_is_left() {
        // 10 units in 20 s since the first report, 30 to go: 60 s.
        assert_eq!(eta_seconds(20.0, 10, 30), Some(60.0));
        assert_eq!(eta_seconds(20.0, 0, 30), None, "no rate before a second unit");
        assert_eq!(eta_seconds(0.0, 3, 30), None);
        assert_eq!(duration_text(44.6), "45 s");
        assert_eq!(duration_text(170.0), "3 min");
        assert_eq!(duration_text(4800.0), "1 h 20 min");
        assert_eq!(files_compiled(1), "1 file compiled");
    }
}
