//! Progress for `kiln install`: an indicatif spinner per step under way (several when builds run
//! side by side) on a terminal, plain lines on stderr otherwise (CI logs, `--no-progress`; each
//! line names its step), nothing under `--quiet`.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use std::collections::BTreeMap;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::build::{Outcome, Phase, Reporter};
use crate::resolve::Step;

pub struct Progress {
    multi: MultiProgress,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
    fancy: bool,
    quiet: bool,
}

impl Progress {
    pub fn new(plain: bool, quiet: bool) -> Progress {
        Progress {
            multi: MultiProgress::new(),
            bars: Mutex::new(BTreeMap::new()),
            fancy: !plain && !quiet && std::io::stderr().is_terminal(),
            quiet,
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
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix:.bold} {msg} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
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
            if let Ok(b) = self.bars.lock()
                && let Some(bar) = b.get(&step.name)
            {
                bar.set_message(format!("{}: {detail}", phase.as_str()));
            }
        } else {
            eprintln!("kiln:   {}: {}: {detail}", step.name, phase.as_str());
        }
    }

    /// The step's spinner says how much of its download has arrived (plain output does not: the
    /// fetch phase line already says what is downloading).
    fn warning(&self, step: &Step, text: &str) {
        // A warning is printed even under --quiet: it says the run was not what was asked.
        let line = format!("warning: {}: {text}", step.name);
        if self.fancy {
            self.multi.suspend(|| eprintln!("{line}"));
        } else {
            eprintln!("{line}");
        }
    }

    fn transfer(&self, step: &Step, done: u64, total: Option<u64>) {
        if self.quiet || !self.fancy {
            return;
        }
        if let Ok(b) = self.bars.lock()
            && let Some(bar) = b.get(&step.name)
        {
            let mb = |n: u64| n as f64 / 1e6;
            bar.set_message(match total {
                Some(t) if t > 0 => format!("fetch: {:.1} of {:.1} MB ({}%)", mb(done), mb(t), done * 100 / t),
                _ => format!("fetch: {:.1} MB", mb(done)),
            });
        }
    }

    fn step_finished(&self, step: &Step, outcome: &Outcome) {
        if let Ok(mut b) = self.bars.lock()
            && let Some(bar) = b.remove(&step.name)
        {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        if self.quiet || !step.action.changes() {
            return;
        }
        let line = format!(
            "kiln: {} {} {} ({:.1} s)",
            outcome.result,
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
