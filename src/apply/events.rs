//! The run's event log: one JSON object a line (`events.jsonl`, beside the step logs) for every
//! step started, phase entered, compile progress (`progress`: `done` of `total`), wheel command
//! measured (`measured`: its `peak_memory` in bytes and its `jobs`) and step finished, with the
//! seconds since the run began. It is the record the timings report is drawn from, and what a
//! person reads to see which builds overlapped, where the time went and what memory they took.
//!
//! It deliberately records only what the [`Reporter`] hears (no samples of its own), and a write
//! that fails is dropped: the log must never fail a build.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Outcome, Phase, Reporter};
use crate::resolve::Step;

/// One line of the event log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the run began.
    pub t: f64,
    pub step: String,
    /// `started`, `phase`, `warning`, `progress`, `measured` or `finished`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For `finished`: `done`, `kept` or `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// For `finished`: what the compile cache did for the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_cache: Option<crate::compile_cache::stats::Stats>,
    /// For `progress`: compile units done, and the total when the build said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// For `measured`: the wheel command's peak resident memory (bytes) and its jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<usize>,
}

/// Writes events as they happen.
pub struct EventLog {
    file: Mutex<File>,
    start: Instant,
}

impl EventLog {
    pub fn create(path: &Path) -> std::io::Result<EventLog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        Ok(EventLog {
            file: Mutex::new(File::create(path)?),
            start: Instant::now(),
        })
    }

    fn write(&self, step: &Step, kind: &str, phase: Option<Phase>, detail: Option<&str>, result: Option<&str>) {
        if !step.action.changes() {
            return;
        }
        let e = Event {
            t: self.start.elapsed().as_secs_f64(),
            step: step.name.clone(),
            kind: kind.to_string(),
            phase: phase.map(|p| p.as_str().to_string()),
            detail: detail.map(str::to_string),
            result: result.map(str::to_string),
            ..Event::default()
        };
        self.append(&e);
    }

    fn append(&self, e: &Event) {
        if let (Ok(line), Ok(mut f)) = (serde_json::to_string(e), self.file.lock()) {
            let _ = writeln!(f, "{}", crate::process::secrets::mask_urls(&line));
        }
    }
}

impl Reporter for EventLog {
    fn step_started(&self, step: &Step) {
        self.write(step, "started", None, None, None);
    }

    fn phase(&self, step: &Step, phase: Phase, detail: &str) {
        self.write(step, "phase", Some(phase), Some(detail), None);
    }

    fn warning(&self, step: &Step, text: &str) {
        self.write(step, "warning", None, Some(text), None);
    }

    fn step_finished(&self, step: &Step, outcome: &Outcome) {
        if !step.action.changes() {
            return;
        }
        self.append(&Event {
            t: self.start.elapsed().as_secs_f64(),
            step: step.name.clone(),
            kind: "finished".into(),
            phase: None,
            detail: outcome.compile_cache.as_ref().map(|s| s.summary()),
            result: Some(outcome.result.as_str().to_string()),
            compile_cache: outcome.compile_cache.clone(),
            ..Event::default()
        });
    }

    fn progress(&self, step: &Step, done: u64, total: Option<u64>) {
        self.append(&Event {
            t: self.start.elapsed().as_secs_f64(),
            step: step.name.clone(),
            kind: "progress".into(),
            done: Some(done),
            total,
            ..Event::default()
        });
    }

    fn measured(&self, step: &Step, peak: u64, jobs: usize) {
        self.append(&Event {
            t: self.start.elapsed().as_secs_f64(),
            step: step.name.clone(),
            kind: "measured".into(),
            detail: Some(format!(
                "peak memory {} with {jobs} job{}",
                super::memory::human(peak),
                if jobs == 1 { "" } else { "s" }
            )),
            peak_memory: Some(peak),
            jobs: Some(jobs),
            ..Event::default()
        });
    }
}

/// Reads an event log (a regular file within the cache limit); lines that do not parse are
/// skipped.
pub fn read(path: &Path) -> Vec<Event> {
    let bytes = crate::state::read(path, crate::state::CACHE_LIMIT, "")
        .ok()
        .flatten()
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Two reporters hearing the same run (the terminal and the event log).
pub struct Tee<'a>(pub &'a (dyn Reporter + Sync), pub &'a (dyn Reporter + Sync));

impl Reporter for Tee<'_> {
    fn step_started(&self, step: &Step) {
        self.0.step_started(step);
        self.1.step_started(step);
    }

    fn phase(&self, step: &Step, phase: Phase, detail: &str) {
        self.0.phase(step, phase, detail);
        self.1.phase(step, phase, detail);
    }

    fn transfer(&self, step: &Step, done: u64, total: Option<u64>) {
        self.0.transfer(step, done, total);
        self.1.transfer(step, done, total);
    }

    fn warning(&self, step: &Step, text: &str) {
        self.0.warning(step, text);
        self.1.warning(step, text);
    }

    fn progress(&self, step: &Step, done: u64, total: Option<u64>) {
        self.0.progress(step, done, total);
        self.1.progress(step, done, total);
    }

    fn measured(&self, step: &Step, peak: u64, jobs: usize) {
        self.0.measured(step, peak, jobs);
        self.1.measured(step, peak, jobs);
    }

    fn step_finished(&self, step: &Step, outcome: &Outcome) {
        self.0.step_finished(step, outcome);
        self.1.step_finished(step, outcome);
    }
}
