//! What long work tells whoever watches it: a task started, how far it is, and finished after so
//! long, ok or not. Core code (the probe, its smoke and serving proofs, the JIT proofs, the AOT
//! compiles, the plan's wheel downloads and reads) calls [`Watch::start`], [`Running::progress`]
//! and [`Running::finish`] ([`Watch::download`] and [`Watch::download_waiting`] wrap a fetch,
//! showing it once bytes flow or once it waits for another kiln); the command layer decides how that is shown
//! (`report::watcher::watcher`: a spinner or bar on a terminal, plain lines otherwise, JSON
//! events under `--json`, nothing under `--quiet`). A [`Watch`] that nobody set ignores everything.
//!
//! It owns the event type and the handle only; it ignores how events are drawn and what the
//! tasks compute.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The kinds of long work kiln shows while they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    /// The probe of an environment: imports tried in interpreters, CUDA binaries read.
    Probe,
    /// A recipe's `[verify] smoke` script on a GPU of a target arch.
    SmokeTest,
    /// A recipe's `[verify] serve` script: the engine starts and generates tokens.
    ServingProof,
    /// A recipe's `[verify] jit` script: kernels compiled for the target archs and read back.
    JitProof,
    /// A recipe's `[aot]` script: JIT modules compiled ahead of time.
    Aot,
    /// A download (a prebuilt wheel the plan judges).
    Download,
    /// The CUDA binaries of a prebuilt wheel read for the plan's verdict on it.
    WheelJudgement,
    /// A bundle written from the cache: bytes of the entries packed so far.
    Pack,
    /// A bundle unpacked into the cache and its entries checked.
    Unpack,
}

impl Task {
    /// Every kind, in the order above.
    pub const ALL: [Task; 9] = [
        Task::Probe,
        Task::SmokeTest,
        Task::ServingProof,
        Task::JitProof,
        Task::Aot,
        Task::Download,
        Task::WheelJudgement,
        Task::Pack,
        Task::Unpack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Task::Probe => "probe",
            Task::SmokeTest => "smoke test",
            Task::ServingProof => "serving proof",
            Task::JitProof => "JIT proof",
            Task::Aot => "AOT compile",
            Task::Download => "download",
            Task::WheelJudgement => "wheel judgement",
            Task::Pack => "pack",
            Task::Unpack => "unpack",
        }
    }

    /// Whether its progress counts bytes (else parts).
    pub fn counts_bytes(self) -> bool {
        matches!(self, Task::Download | Task::Pack | Task::Unpack)
    }
}

/// One thing that happened to a task.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    Started {
        task: Task,
        /// The component it is for.
        subject: String,
        /// What it does (`for 9.0, 12.0`).
        detail: String,
    },
    /// How far it is: `done` of `total` (bytes for a download), at most one a second.
    Progress {
        task: Task,
        subject: String,
        done: u64,
        total: Option<u64>,
    },
    Finished {
        task: Task,
        subject: String,
        seconds: f64,
        ok: bool,
    },
}

impl Event {
    /// The task it is about, and that task's component.
    pub fn task(&self) -> (Task, &str) {
        match self {
            Event::Started { task, subject, .. }
            | Event::Progress { task, subject, .. }
            | Event::Finished { task, subject, .. } => (*task, subject),
        }
    }
}

/// How often a task's progress is passed on.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

type Sink = Arc<dyn Fn(&Event) + Send + Sync>;

/// Where events go; cloned with the settings. `Watch::default()` drops them.
#[derive(Clone, Default)]
pub struct Watch(Option<Sink>);

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "Watch(set)" } else { "Watch(none)" })
    }
}

impl Watch {
    /// A watch that hands every event to `sink` (from any thread).
    pub fn new(sink: impl Fn(&Event) + Send + Sync + 'static) -> Watch {
        Watch(Some(Arc::new(sink)))
    }

    fn send(&self, e: &Event) {
        if let Some(s) = &self.0 {
            s(e)
        }
    }

    /// `task` for `subject` starts now; say when it is done with [`Running::finish`]. A task
    /// dropped without it reports that it did not finish ok.
    pub fn start(&self, task: Task, subject: &str, detail: impl Into<String>) -> Running {
        self.send(&Event::Started {
            task,
            subject: subject.to_string(),
            detail: detail.into(),
        });
        Running {
            watch: self.clone(),
            task,
            subject: subject.to_string(),
            started: Instant::now(),
            told: None,
            done: false,
        }
    }

    /// Runs `fetch` with a progress callback that starts a [`Task::Download`] of `what` for
    /// `subject` once bytes flow (a file already in the cache is no wait, and shows nothing),
    /// passes on its progress, and finishes it with `fetch`'s outcome.
    pub fn download<T, E>(
        &self,
        subject: &str,
        what: &str,
        fetch: impl FnOnce(&mut dyn FnMut(u64, Option<u64>)) -> Result<T, E>,
    ) -> Result<T, E> {
        self.download_waiting(subject, what, |bytes, _| fetch(bytes))
    }

    /// [`Watch::download`] for a fetch that may first wait for another kiln fetching the same
    /// file (`fetch` calls its second callback with who holds it): the wait starts the task at
    /// once, its detail saying whom it waits for, so that no wait is silent.
    pub fn download_waiting<T, E>(
        &self,
        subject: &str,
        what: &str,
        fetch: impl FnOnce(&mut dyn FnMut(u64, Option<u64>), &mut dyn FnMut(&dyn fmt::Display)) -> Result<T, E>,
    ) -> Result<T, E> {
        let task: std::cell::RefCell<Option<Running>> = std::cell::RefCell::new(None);
        let got = fetch(
            &mut |done, total| {
                task.borrow_mut()
                    .get_or_insert_with(|| self.start(Task::Download, subject, what))
                    .progress(done, total)
            },
            &mut |holder| {
                let detail = format!("{what}: waiting for another kiln fetching it ({holder})");
                task.borrow_mut()
                    .get_or_insert_with(|| self.start(Task::Download, subject, detail));
            },
        );
        if let Some(t) = task.into_inner() {
            t.finish(got.is_ok());
        }
        got
    }
}

/// A task under way.
pub struct Running {
    watch: Watch,
    task: Task,
    subject: String,
    started: Instant,
    /// When progress was last passed on.
    told: Option<Instant>,
    done: bool,
}

impl Running {
    /// `done` of `total` so far; passed on at most every [`PROGRESS_EVERY`], and always once
    /// it is complete.
    pub fn progress(&mut self, done: u64, total: Option<u64>) {
        let complete = total.is_some_and(|t| done >= t);
        if !complete && self.told.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            return;
        }
        self.told = Some(Instant::now());
        self.watch.send(&Event::Progress {
            task: self.task,
            subject: self.subject.clone(),
            done,
            total,
        });
    }

    pub fn finish(mut self, ok: bool) {
        self.report(ok);
    }

    fn report(&mut self, ok: bool) {
        if self.done {
            return;
        }
        self.done = true;
        self.watch.send(&Event::Finished {
            task: self.task,
            subject: std::mem::take(&mut self.subject),
            seconds: self.started.elapsed().as_secs_f64(),
            ok,
        });
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.report(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn recorded() -> (Watch, Arc<Mutex<Vec<Event>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        (Watch::new(move |e| into.lock().unwrap().push(e.clone())), seen)
    }

    #[test]
    fn a_task_reports_its_start_and_its_end_once_and_a_dropped_one_as_not_ok() {
        let (w, seen) = recorded();
        w.start(Task::JitProof, "flashinfer", "for 9.0").finish(true);
        drop(w.start(Task::ServingProof, "vllm", "on 9.0"));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        assert_eq!(
            seen[0],
            Event::Started {
                task: Task::JitProof,
                subject: "flashinfer".into(),
                detail: "for 9.0".into()
            }
        );
        assert!(matches!(&seen[1], Event::Finished { ok: true, subject, .. } if subject == "flashinfer"));
        assert!(matches!(
            &seen[3],
            Event::Finished {
                ok: false,
                task: Task::ServingProof,
                ..
            }
        ));
        let json = serde_json::to_string(&seen[0]).unwrap();
        assert_eq!(
            json,
            r#"{"event":"started","task":"jit-proof","subject":"flashinfer","detail":"for 9.0"}"#
        );
        // Nobody watching: nothing to do, nothing fails.
        Watch::default().start(Task::Aot, "flashinfer", "").finish(true);
    }

    /// A download shows only once bytes flow (a cached file is no wait), and ends with the
    /// fetch's outcome: what `bundle --for` now tells of the sources it fetches.
    #[test]
    fn a_download_starts_with_its_first_bytes_and_ends_with_the_fetch() {
        let (w, seen) = recorded();
        let cached: Result<u8, ()> = w.download("vllm", "vllm-0.26.0.tar.gz", |_| Ok(1));
        assert_eq!(cached, Ok(1));
        assert!(seen.lock().unwrap().is_empty(), "a file already there shows nothing");
        let failed: Result<(), String> = w.download("vllm", "vllm-0.26.0.tar.gz", |p| {
            p(10, Some(100));
            Err("cut".into())
        });
        assert!(failed.is_err());
        let seen = seen.lock().unwrap();
        assert!(
            matches!(&seen[0], Event::Started { task: Task::Download, detail, .. } if detail == "vllm-0.26.0.tar.gz")
        );
        assert!(matches!(
            &seen[1],
            Event::Progress {
                done: 10,
                total: Some(100),
                ..
            }
        ));
        assert!(matches!(&seen[2], Event::Finished { ok: false, .. }));
        assert_eq!(seen.len(), 3);
        drop(seen);
    }

    /// A fetch that waits for another kiln shows at once, saying for whom, and ends with it.
    #[test]
    fn a_download_that_waits_for_another_kiln_shows_the_wait() {
        let (w, seen) = recorded();
        let got: Result<u8, ()> = w.download_waiting("vllm", "vllm-0.26.0.tar.gz", |_, waiting| {
            waiting(&"pid 7 (kiln install vllm)");
            Ok(1)
        });
        assert_eq!(got, Ok(1));
        let seen = seen.lock().unwrap();
        assert!(
            matches!(&seen[0], Event::Started { task: Task::Download, detail, .. }
                if detail == "vllm-0.26.0.tar.gz: waiting for another kiln fetching it (pid 7 (kiln install vllm))"),
            "{seen:?}"
        );
        assert!(matches!(&seen[1], Event::Finished { ok: true, .. }), "{seen:?}");
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn all_names_every_kind_once() {
        for t in Task::ALL {
            // A new kind does not compile here until it is matched: the reminder to list it in ALL.
            match t {
                Task::Probe
                | Task::SmokeTest
                | Task::ServingProof
                | Task::JitProof
                | Task::Aot
                | Task::Download
                | Task::WheelJudgement
                | Task::Pack
                | Task::Unpack => {}
            }
        }
        let names: std::collections::BTreeSet<&str> = Task::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(names.len(), Task::ALL.len());
    }

    #[test]
    fn progress_passes_the_first_and_the_complete_report_and_at_most_one_a_second_between() {
        let (w, seen) = recorded();
        let mut t = w.start(Task::Download, "torch", "torch-2.11.0.whl");
        for done in 1..=1000 {
            t.progress(done, Some(1000));
        }
        t.finish(true);
        let progress: Vec<u64> = seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::Progress { done, .. } => Some(*done),
                _ => None,
            })
            .collect();
        assert_eq!(progress, [1, 1000]);
    }
}
