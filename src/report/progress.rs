//! Progress for `kiln install`: an indicatif spinner per step on a terminal, plain lines on
//! stderr otherwise (CI logs, `--no-progress`), nothing under `--quiet`.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::build::{Outcome, Phase, Reporter};
use crate::resolve::Step;

pub struct Progress {
    bar: Mutex<Option<ProgressBar>>,
    fancy: bool,
    quiet: bool,
}

impl Progress {
    pub fn new(plain: bool, quiet: bool) -> Progress {
        Progress {
            bar: Mutex::new(None),
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
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix:.bold} {msg} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(format!("{} {}", step.action.as_str(), step.name));
            bar.enable_steady_tick(Duration::from_millis(120));
            if let Ok(mut b) = self.bar.lock() {
                *b = Some(bar);
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
            if let Ok(b) = self.bar.lock()
                && let Some(bar) = b.as_ref()
            {
                bar.set_message(format!("{}: {detail}", phase.as_str()));
            }
        } else {
            eprintln!("kiln:   {}: {}: {detail}", step.name, phase.as_str());
        }
    }

    fn step_finished(&self, step: &Step, outcome: &Outcome) {
        if let Ok(mut b) = self.bar.lock()
            && let Some(bar) = b.take()
        {
            bar.finish_and_clear();
        }
        if self.quiet || !step.action.changes() {
            return;
        }
        eprintln!(
            "kiln: {} {} {} ({:.1} s)",
            outcome.result,
            step.action.as_str(),
            step.name,
            outcome.seconds
        );
    }
}
