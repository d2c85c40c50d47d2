//! How long work shows while it runs (the [`crate::watch`] events of the probe, the proofs, AOT
//! compiles and plan-time downloads): a spinner or bar per task on a terminal, and otherwise (CI
//! logs, `--no-progress`) a line once a task has run for [`SHOW_AFTER`], how far it is at most
//! every [`PLAIN_EVERY`] after that, and a line when it ends;
//! one JSON object per event on stderr under `--json` (stdout keeps the report); nothing under
//! `--quiet`. A task shorter than [`SHOW_AFTER`] leaves no line.
//!
//! It owns only that drawing; what the tasks are and when they run is the caller's.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::progress::PLAIN_EVERY;
use crate::apply::memory::human;
use crate::settings::Settings;
use crate::watch::{Event, Watch};

/// The watch the settings ask for.
pub fn watcher(settings: &Settings) -> Watch {
    if settings.quiet {
        return Watch::default();
    }
    if settings.json {
        return Watch::new(|e| {
            if let Ok(line) = serde_json::to_string(e) {
                eprintln!("{line}");
            }
        });
    }
    if settings.progress && std::io::stderr().is_terminal() {
        let bars: Mutex<BTreeMap<String, ProgressBar>> = Mutex::new(BTreeMap::new());
        return Watch::new(move |e| spinner(&bars, e));
    }
    let shown: Arc<Mutex<Shown>> = Arc::default();
    Watch::new(move |e| plain(&shown, e))
}

/// A task shorter than this shows nothing but a spinner: its lines would be noise.
pub const SHOW_AFTER: Duration = Duration::from_secs(2);

/// Which task under way an event is about: its kind and its component.
fn key(e: &Event) -> String {
    let (task, subject) = e.task();
    format!("{}/{subject}", task.as_str())
}

/// The tasks under way in plain output: per key, the serial of the task that holds it (a later
/// task of the same kind and subject gets another), whether its start line was printed, and
/// when its progress was last printed.
#[derive(Default)]
struct Shown {
    next: u64,
    running: BTreeMap<String, (u64, bool, Option<Instant>)>,
}

/// Plain lines: a task's start once it has run for [`SHOW_AFTER`], how far it is at most every
/// [`PLAIN_EVERY`] after that, and its end.
fn plain(shown: &Arc<Mutex<Shown>>, e: &Event) {
    let k = key(e);
    match e {
        Event::Started { .. } => {
            let Ok(mut m) = shown.lock() else { return };
            m.next += 1;
            let serial = m.next;
            m.running.insert(k.clone(), (serial, false, None));
            drop(m);
            let (shown, text) = (shown.clone(), line(e));
            std::thread::spawn(move || {
                std::thread::sleep(SHOW_AFTER);
                if let Ok(mut m) = shown.lock()
                    && let Some((s, printed @ false, _)) = m.running.get_mut(&k)
                    && *s == serial
                {
                    *printed = true;
                    eprintln!("{text}");
                }
            });
        }
        Event::Progress { .. } => {
            // Once its start line is out, a long task says how far it is, at most every
            // PLAIN_EVERY (a download's bytes, a probe's parts).
            if let Ok(mut m) = shown.lock()
                && let Some((_, true, last)) = m.running.get_mut(&k)
                && last.is_none_or(|t| t.elapsed() >= PLAIN_EVERY)
            {
                *last = Some(Instant::now());
                eprintln!("{}", line(e));
            }
        }
        Event::Finished { .. } => {
            let printed = shown.lock().ok().and_then(|mut m| m.running.remove(&k));
            if printed.is_some_and(|(_, p, _)| p) {
                eprintln!("{}", line(e));
            }
        }
    }
}

/// The plain line for an event: `kiln: JIT proof flashinfer for 9.0`, `kiln: done JIT proof
/// flashinfer (8.0 s)`, `kiln: JIT proof flashinfer failed (8.0 s)`.
pub fn line(e: &Event) -> String {
    match e {
        Event::Started { task, subject, detail } => {
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(" {detail}")
            };
            format!("kiln: {} {subject}{detail}", task.as_str())
        }
        Event::Progress {
            task,
            subject,
            done,
            total,
        } => {
            // Bytes for a download or a bundle; for the rest, parts done.
            let amount = |n: u64| {
                if task.counts_bytes() { human(n) } else { n.to_string() }
            };
            let of = total.map(|t| format!(" of {}", amount(t))).unwrap_or_default();
            format!("kiln: {} {subject}: {}{of}", task.as_str(), amount(*done))
        }
        Event::Finished {
            task,
            subject,
            seconds,
            ok: true,
        } => format!("kiln: done {} {subject} ({seconds:.1} s)", task.as_str()),
        Event::Finished {
            task, subject, seconds, ..
        } => format!("kiln: {} {subject} failed ({seconds:.1} s)", task.as_str()),
    }
}

/// On a terminal: a spinner per task under way, a bar once its total is known, and a line at
/// its end when it ran for [`SHOW_AFTER`] or more.
fn spinner(bars: &Mutex<BTreeMap<String, ProgressBar>>, e: &Event) {
    let Ok(mut bars) = bars.lock() else { return };
    let k = key(e);
    match e {
        Event::Started { .. } => {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(line(e).trim_start_matches("kiln: ").to_string());
            bar.enable_steady_tick(Duration::from_millis(120));
            bars.insert(k, bar);
        }
        Event::Progress { task, done, total, .. } => {
            if let Some(bar) = bars.get(&k) {
                if let Some(t) = total
                    && bar.length() != Some(*t)
                {
                    bar.set_length(*t);
                    let template = if task.counts_bytes() {
                        "{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})"
                    } else {
                        "{msg} [{bar:30}] {pos}/{len} [{elapsed}]"
                    };
                    bar.set_style(
                        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                }
                bar.set_position(*done);
            }
        }
        Event::Finished { seconds, .. } => {
            if let Some(bar) = bars.remove(&k) {
                bar.finish_and_clear();
            }
            if *seconds >= SHOW_AFTER.as_secs_f64() {
                eprintln!("{}", line(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::Task;

    #[test]
    fn a_short_task_leaves_no_line_and_its_timer_does_not_show_the_next_of_its_kind() {
        let shown: Arc<Mutex<Shown>> = Arc::default();
        let started = |d: &str| Event::Started {
            task: Task::Probe,
            subject: "/venv/bin/python".into(),
            detail: d.into(),
        };
        let finished = Event::Finished {
            task: Task::Probe,
            subject: "/venv/bin/python".into(),
            seconds: 0.1,
            ok: true,
        };
        plain(&shown, &started("first"));
        plain(&shown, &finished);
        std::thread::sleep(SHOW_AFTER / 2);
        plain(&shown, &started("second"));
        // The first task's timer fires while the second one runs (its own fires later): it
        // prints nothing and marks nothing, so the second one, short too, ends without a line.
        std::thread::sleep(SHOW_AFTER / 2 + Duration::from_millis(400));
        let state = |m: &Shown| {
            m.running
                .get("probe//venv/bin/python")
                .map(|(s, p, l)| (*s, *p, l.is_some()))
        };
        assert_eq!(state(&shown.lock().unwrap()), Some((2, false, false)));
        // Before its start line, its progress is not shown; once it is out, the first report is,
        // and the next only after PLAIN_EVERY.
        let progress = Event::Progress {
            task: Task::Probe,
            subject: "/venv/bin/python".into(),
            done: 1,
            total: Some(2),
        };
        plain(&shown, &progress);
        assert_eq!(state(&shown.lock().unwrap()), Some((2, false, false)));
        // As its own timer does once it has run SHOW_AFTER:
        shown
            .lock()
            .unwrap()
            .running
            .get_mut("probe//venv/bin/python")
            .unwrap()
            .1 = true;
        plain(&shown, &progress);
        let first = shown.lock().unwrap().running["probe//venv/bin/python"].2;
        plain(&shown, &progress);
        assert_eq!(shown.lock().unwrap().running["probe//venv/bin/python"].2, first);
        plain(&shown, &finished);
        assert!(shown.lock().unwrap().running.is_empty());
    }

    #[test]
    fn each_event_reads_as_one_line_naming_the_task_and_its_component() {
        let started = Event::Started {
            task: Task::ServingProof,
            subject: "vllm".into(),
            detail: "on 9.0".into(),
        };
        assert_eq!(line(&started), "kiln: serving proof vllm on 9.0");
        let done = |ok| Event::Finished {
            task: Task::JitProof,
            subject: "flashinfer".into(),
            seconds: 8.04,
            ok,
        };
        assert_eq!(line(&done(true)), "kiln: done JIT proof flashinfer (8.0 s)");
        assert_eq!(line(&done(false)), "kiln: JIT proof flashinfer failed (8.0 s)");
        let progress = |task, subject: &str, done, total| Event::Progress {
            task,
            subject: subject.into(),
            done,
            total: Some(total),
        };
        assert_eq!(
            line(&progress(Task::Download, "sglang-kernel", 1_500_000, 373_000_000)),
            "kiln: download sglang-kernel: 1.4 MiB of 355.7 MiB"
        );
        assert_eq!(
            line(&progress(Task::Probe, "/venv/bin/python", 3, 11)),
            "kiln: probe /venv/bin/python: 3 of 11"
        );
    }
}
