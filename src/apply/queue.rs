//! Running a plan: steps the plan keeps are reported as kept; each changing step's build starts
//! on its own thread once what it depends on is installed and its planned jobs fit the CPUs and
//! memory left ([`super::schedule`]); each finished wheel is installed and verified on this
//! thread, one at a time, in the order builds finish, inside one transaction ([`super::txn`]),
//! after the builds that the CPUs it gave back allow have started (they overlap its install).
//! Builds that finished together install together ([`super::batch`]: one installer call, each
//! proven in an interpreter of its own, side by side) until a batch fails; each step then
//! installs on its own for the rest of the run.
//! After a failure no new build starts and the environment is put back as it was before the
//! run, the steps proven before included; builds under way finish and are not installed (builds
//! are never cancelled, so one started just before a failing install delays the report by its
//! own length). With `--keep-done` proven steps stay, and builds under way that succeed are
//! installed (they depend on nothing that failed).
//!
//! It deliberately ignores what a step does (`step`, `commit` and `batch` do it) and never
//! retries a failed step.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::time::Instant;

use super::batch::{self, Batched, Ready};
use super::commit::{StepDone, commit};
use super::failure::BuildFailure;
use super::failure::Restored;
use super::step::prepare;
use super::txn::Txn;
use super::{Context, Outcome, Reporter, RunReport, StepResult, schedule};
use crate::probe::python::PythonFacts;
use crate::resolve::{Plan, Step};

/// Runs every changing step of `plan` (see the module doc).
pub fn execute(plan: &Plan, cx: &Context, reporter: &(dyn Reporter + Sync)) -> RunReport {
    let steps = &plan.steps;
    let waits = schedule::waits(plan, cx.set);
    let mut q = Queue::new(steps.len());
    for (i, step) in steps.iter().enumerate().filter(|(_, s)| !s.action.changes()) {
        reporter.step_started(step);
        q.finished(i, step, outcome(step, Instant::now(), StepResult::Kept, None), reporter);
    }
    let mut budget = schedule::Budget::now(cx.machine, cx.memory_limit);
    let mut txn = Txn::new(cx);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel();
        let mut running = 0;
        // Starts every build whose dependencies are installed and whose jobs fit now.
        let start_what_fits = |q: &mut Queue, budget: &mut schedule::Budget, running: &mut usize| {
            for (i, step) in steps.iter().enumerate() {
                if !q.may_start(i, &waits[i]) {
                    continue;
                }
                let (jobs, memory) = step.build.as_ref().map_or((1, None), |b| (b.jobs, b.memory()));
                let Some(claim) = budget.claim(jobs, memory, *running) else {
                    continue;
                };
                reporter.step_started(step);
                q.started[i] = Some(Instant::now());
                *running += 1;
                let known = q.latest.clone().unwrap_or_else(|| cx.facts.clone());
                let tx = tx.clone();
                scope.spawn(move || {
                    // What the build leaves running ends with it, whether it built or failed.
                    let ended = {
                        let _leftovers = crate::process::group::scope();
                        prepare(step, plan, cx, &known, reporter)
                    };
                    let _ = tx.send((i, claim, ended));
                });
            }
        };
        // Builds that finished, in the order they finished, waiting for their install.
        let mut ready: Ready = VecDeque::new();
        // Until a batch fails: then each step installs on its own, for the rest of the run.
        let mut batching = true;
        loop {
            // No build starts while a failed one waits to be reported, or after a failure.
            let clean = |ready: &Ready| ready.iter().all(|(_, p)| p.is_ok());
            if clean(&ready) && txn.open_for_more() {
                start_what_fits(&mut q, &mut budget, &mut running);
            }
            if running == 0 && ready.is_empty() {
                break;
            }
            // Waits for a build only when no finished one waits for its install.
            let first = match ready.is_empty() {
                true => match rx.recv() {
                    Ok(m) => Some(m),
                    Err(_) => break,
                },
                false => None,
            };
            // Every build that finished meanwhile gives its CPUs back now, so that the next
            // builds start before these install, and overlap their installs.
            for (i, claim, prepared) in first.into_iter().chain(rx.try_iter()) {
                running -= 1;
                budget.release(claim);
                ready.push_back((i, prepared));
            }
            if clean(&ready) && txn.open_for_more() {
                start_what_fits(&mut q, &mut budget, &mut running);
            }
            // Builds that finished together install together while nothing failed.
            let together = match batching && txn.open_for_more() {
                true => batch::take(&mut ready, steps, cx),
                false => None,
            };
            if let Some(items) = together {
                let _leftovers = crate::process::group::scope();
                match batch::commit_all(items, steps, plan, cx, reporter, &mut txn) {
                    Batched::Done(done) => {
                        for (i, d) in done {
                            let since = q.started[i].unwrap_or_else(Instant::now);
                            q.committed(i, &steps[i], since, Ok(d), cx, reporter, &mut txn);
                        }
                    }
                    // First again, in the order they finished.
                    Batched::OneByOne(items) => {
                        batching = false;
                        for (i, p) in items.into_iter().rev() {
                            ready.push_front((i, Ok(p)));
                        }
                    }
                    Batched::Failed(i, f) => {
                        let since = q.started[i].unwrap_or_else(Instant::now);
                        q.committed(i, &steps[i], since, Err(f), cx, reporter, &mut txn);
                    }
                    // Put back; the run ends below as any interrupted run does.
                    Batched::Interrupted => {}
                }
                continue;
            }
            let Some((i, prepared)) = ready.pop_front() else {
                continue;
            };
            let step = &steps[i];
            let since = q.started[i].unwrap_or_else(Instant::now);
            if prepared.is_ok() && !txn.open_for_more() {
                continue; // built after the transaction was rolled back: not installed
            }
            let committed = prepared.and_then(|p| {
                // What the install and verification leave running ends with the step.
                let _leftovers = crate::process::group::scope();
                commit(step, plan, cx, p, reporter, &mut txn)
            });
            q.committed(i, step, since, committed, cx, reporter, &mut txn);
        }
    });
    // Interrupted before every step was proven: the transaction does not stand half done.
    let unfinished = steps
        .iter()
        .enumerate()
        .any(|(i, s)| s.action.changes() && !q.installed[i]);
    if crate::process::interrupted() && unfinished && q.failures.is_empty() {
        txn.failed();
    }
    let undo = txn.finish();
    if let Some(u) = &undo {
        for o in q.outcomes.iter_mut().flatten() {
            if o.result == StepResult::Done && u.rolled_back.contains(&o.name) {
                o.result = StepResult::RolledBack;
            }
        }
    }
    let mut report = q.report();
    report.undo = undo;
    report
}

/// Where each step of a run is.
struct Queue {
    outcomes: Vec<Option<Outcome>>,
    installed: Vec<bool>,
    started: Vec<Option<Instant>>,
    failures: Vec<BuildFailure>,
    /// The environment as the last verification saw it (`None`: as the plan saw it).
    latest: Option<PythonFacts>,
}

impl Queue {
    fn new(n: usize) -> Queue {
        Queue {
            outcomes: vec![None; n],
            installed: vec![false; n],
            started: vec![None; n],
            failures: Vec::new(),
            latest: None,
        }
    }

    /// Whether step `i` may start: kiln was not interrupted, nothing failed, it has not started,
    /// and every step it waits for is installed.
    fn may_start(&self, i: usize, waits: &[usize]) -> bool {
        !crate::process::interrupted()
            && self.failures.is_empty()
            && self.started[i].is_none()
            && !self.installed[i]
            && waits.iter().all(|&j| self.installed[j])
    }

    fn finished(&mut self, i: usize, step: &Step, o: Outcome, reporter: &dyn Reporter) {
        reporter.step_finished(step, &o);
        self.installed[i] = o.result != StepResult::Failed;
        self.outcomes[i] = Some(o);
    }

    /// Step `i`'s install is over: proven, or failed (the transaction then puts the run back).
    #[allow(clippy::too_many_arguments)]
    fn committed(
        &mut self,
        i: usize,
        step: &Step,
        since: Instant,
        committed: Result<StepDone, BuildFailure>,
        cx: &Context,
        reporter: &dyn Reporter,
        txn: &mut Txn,
    ) {
        match committed {
            Ok(done) => {
                self.finished(i, step, outcome(step, since, StepResult::Done, Some(&done)), reporter);
                let before = self.latest.take();
                self.latest = Some(carry_torch_facts(before.as_ref().unwrap_or(cx.facts), done.facts));
            }
            Err(mut f) => {
                self.finished(i, step, outcome(step, since, StepResult::Failed, None), reporter);
                txn.failed();
                if let (Restored::Unchanged, Some(u)) = (&f.restored, &txn.undo)
                    && (!u.kept.is_empty() || !u.rolled_back.is_empty())
                {
                    f.restored = Restored::NotReached {
                        kept: !u.kept.is_empty(),
                    };
                }
                self.failures.push(f);
            }
        }
    }

    fn report(self) -> RunReport {
        let mut failures = self.failures.into_iter();
        RunReport {
            outcomes: self.outcomes.into_iter().flatten().collect(),
            failure: failures.next(),
            more_failures: failures.collect(),
            facts: self.latest,
            undo: None,
        }
    }
}

fn outcome(step: &Step, since: Instant, result: StepResult, done: Option<&StepDone>) -> Outcome {
    Outcome {
        name: step.name.clone(),
        action: step.action,
        result,
        seconds: since.elapsed().as_secs_f64(),
        wheel: done.and_then(|d| d.wheel.as_ref()).map(|w| w.display().to_string()),
        source: done.map(|d| d.source.clone()),
        from_cache: done.is_some_and(|d| d.from_cache),
        note: done.and_then(|d| d.note.clone()),
        compile_cache: done.and_then(|d| d.compile_cache.clone()),
    }
}

/// A verification probe that did not import torch still describes the same torch when its
/// version did not change: keep the ABI facts an earlier probe saw.
fn carry_torch_facts(before: &PythonFacts, mut after: PythonFacts) -> PythonFacts {
    let version = |f: &PythonFacts| f.dists.get("torch").map(|d| d.version.clone());
    if after.torch.is_none() && version(before) == version(&after) {
        after.torch = before.torch.clone();
    }
    after
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::python::{Dist, TorchFacts};

    fn with_torch(version: &str, facts: Option<TorchFacts>) -> PythonFacts {
        let mut f = PythonFacts::nothing_installed("/v/bin/python", "3.12.1");
        f.dists.insert(
            "torch".into(),
            Dist {
                name: "torch".into(),
                version: version.into(),
                location: None,
                dist_info: None,
                direct_url: None,
                requires: Vec::new(),
                installer: None,
                kiln: None,
                kiln_unreadable: None,
            },
        );
        f.torch = facts;
        f
    }

    #[test]
    fn torch_abi_facts_carry_over_only_while_torch_is_the_same() {
        let abi = TorchFacts {
            version: Some("2.14.1".into()),
            cuda: Some("13.0".into()),
            git_version: None,
            cxx11_abi: Some(true),
            arch_list: None,
        };
        let before = with_torch("2.14.1", Some(abi.clone()));
        let same = carry_torch_facts(&before, with_torch("2.14.1", None));
        assert_eq!(same.torch, Some(abi));
        let replaced = carry_torch_facts(&before, with_torch("2.15.0", None));
        assert_eq!(replaced.torch, None);
    }

    #[test]
    fn a_step_starts_once_what_it_waits_for_is_installed_and_nothing_failed() {
        let mut q = Queue::new(3);
        assert!(q.may_start(0, &[]));
        assert!(!q.may_start(2, &[0, 1]));
        q.installed[0] = true;
        q.installed[1] = true;
        assert!(q.may_start(2, &[0, 1]));
        q.started[2] = Some(Instant::now());
        assert!(!q.may_start(2, &[0, 1]), "started once");
        q.failures.push(BuildFailure::new(
            "x",
            super::super::Phase::Wheel,
            super::super::StepError::NoRecipe,
        ));
        assert!(!q.may_start(1, &[]), "no new build after a failure");
    }
}
