//! Installing built steps together: where more than one finished build waits for its install
//! (builds that ended together, wheels taken from the cache), their wheels go in with one
//! installer call and are proven side by side — each component's imports in a fresh interpreter
//! of its own, as a step's own verification has them, so that no component is proven by what
//! another loaded — beside one listing of the environment; smoke tests then run one at a time
//! (they share the GPU) and each step is recorded as `commit` records it.
//!
//! Only in a run that is one transaction (a failure rolls every step back anyway, and the run's
//! snapshot undoes the batch after a kill), and only for steps whose install is the wheel alone:
//! no runtime dependencies, nothing replaced under another name, no run-time environment file,
//! no index of its own. Anything that fails sends the batch back, the environment put back as
//! it was before it, to install one step at a time (`commit`), which then says which step failed
//! and why: a batch never reports a failure of its own unless putting the environment back fails.
//!
//! It deliberately ignores which steps finished together (`queue` hands them over) and how a
//! failure is reported (`commit` does that on the way back).

use super::commit::{self, StepDone};
use super::failure::{BuildFailure, Restored, StepError};
use super::fate::put_back;
use super::replace;
use super::step::{Prepared, log_of, recipe_of};
use super::txn::Txn;
use super::{Context, Phase, Reporter, wheels};
use crate::probe::normalize;
use crate::probe::python::{self, PythonFacts};
use crate::probe::side_by_side;
use crate::resolve::{Plan, Step};
use crate::store::backup::Backup;

/// What became of a batch.
pub(super) enum Batched {
    /// Every step installed, verified and recorded.
    Done(Vec<(usize, StepDone)>),
    /// Something failed (why): the environment is as it was before the batch, and each step
    /// goes back to install on its own.
    OneByOne(Vec<(usize, Prepared)>, String),
    /// The environment could not be put back after a failure: the run fails on this step.
    Failed(usize, BuildFailure),
}

/// Whether `step` (built as `p`) may install in a batch: its install is its wheel alone.
pub(super) fn batchable(step: &Step, cx: &Context, p: &Prepared) -> bool {
    let Some(r) = cx.set.get(&step.name) else {
        return false;
    };
    !cx.keep_done
        && !r.install_deps
        && step.runtime_env.is_empty()
        && p.index_url.is_none()
        && replace::replaced(r, cx.facts).is_empty()
}

/// One step of a batch, as far as it got.
struct Member {
    i: usize,
    p: Prepared,
    dist: String,
    backup: Option<Backup>,
    imports: Vec<String>,
}

/// Installs, verifies and records `items` (each [`batchable`]) together; see the module doc.
pub(super) fn commit_all(
    items: Vec<(usize, Prepared)>,
    steps: &[Step],
    plan: &Plan,
    cx: &Context,
    reporter: &dyn Reporter,
    txn: &mut Txn,
) -> Batched {
    // Backed up first: nothing has changed yet, so a failure here just sends the batch back.
    let mut members = Vec::new();
    let mut items = items.into_iter();
    for (i, p) in items.by_ref() {
        let step = &steps[i];
        let Ok(r) = recipe_of(step, cx) else {
            members.push(member(i, p, String::new(), None, Vec::new()));
            return back(members, items.collect(), "a step has no recipe".into());
        };
        let dist = r.dist.clone().unwrap_or_else(|| r.name.clone());
        let installed = cx.facts.dists.get(&normalize(&dist));
        let imports = commit::proof_imports(step, r, cx);
        match replace::back_up(installed, &[], &p.work.join("backup")) {
            Ok(backup) => members.push(member(i, p, dist, backup, imports)),
            Err(e) => {
                let why = format!("cannot back up {dist}: {e}");
                members.push(member(i, p, dist, None, imports));
                return back(members, items.collect(), why);
            }
        }
    }
    let names: Vec<String> = members.iter().map(|m| steps[m.i].name.clone()).collect();
    if let Err(e) = txn.begin_batch(&names) {
        return back(members, Vec::new(), format!("cannot write the install journal: {e}"));
    }
    for n in &names {
        crate::crash_point::reached(&format!("journal begun {n}"));
    }
    let logs: Vec<_> = members
        .iter()
        .map(|m| log_of(cx, &steps[m.i], Phase::Install))
        .collect();
    for m in &members {
        let others = names.len() - 1;
        let detail = format!("{} ({}, one call with {others} more)", m.dist, cx.installer.name());
        reporter.phase(&steps[m.i], Phase::Install, &detail);
    }
    let what: Vec<String> = members.iter().map(|m| m.p.to_install.clone()).collect();
    let installed = cx
        .installer
        .install(&cx.python, &what, false, None, None)
        .run_logged(&logs[0]);
    for log in &logs[1..] {
        let _ = std::fs::copy(&logs[0], log);
    }
    if let Err(e) = installed {
        return undo(members, steps, cx, format!("the install failed ({})", e.status));
    }
    for n in &names {
        crate::crash_point::reached(&format!("installed {n}"));
    }
    let facts = match verify(&members, steps, plan, cx, reporter) {
        Ok(facts) => facts,
        Err(why) => return undo(members, steps, cx, why),
    };
    for m in &members {
        let step = &steps[m.i];
        let r = recipe_of(step, cx).expect("looked up above");
        if let Err(f) = commit::record(step, r, plan, cx, &facts, &m.dist, &m.p) {
            return undo(members, steps, cx, f.message.to_string());
        }
    }
    let proven: Vec<&str> = names.iter().map(String::as_str).collect();
    if let Err(e) = txn.step_proven(&proven) {
        return undo(members, steps, cx, format!("cannot write the install journal: {e}"));
    }
    let done = members
        .into_iter()
        .map(|m| {
            let step = &steps[m.i];
            let is = wheels::Expected {
                dist: &m.dist,
                version: step.version.as_deref().unwrap_or_default(),
            };
            (m.i, commit::proven(step, cx, m.p, is, facts.clone()))
        })
        .collect();
    Batched::Done(done)
}

fn member(i: usize, p: Prepared, dist: String, backup: Option<Backup>, imports: Vec<String>) -> Member {
    Member {
        i,
        p,
        dist,
        backup,
        imports,
    }
}

/// Nothing changed yet: the batch goes back as it came (with the items not looked at).
fn back(members: Vec<Member>, rest: Vec<(usize, Prepared)>, why: String) -> Batched {
    let mut items: Vec<(usize, Prepared)> = members.into_iter().map(|m| (m.i, m.p)).collect();
    items.extend(rest);
    Batched::OneByOne(items, why)
}

/// The listing and every member's imports, side by side, then each member judged on its own
/// interpreter's answer; the facts that come back are the listing with every member's imports
/// and smoke tests.
fn verify(
    members: &[Member],
    steps: &[Step],
    plan: &Plan,
    cx: &Context,
    reporter: &dyn Reporter,
) -> Result<PythonFacts, String> {
    for m in members {
        reporter.phase(&steps[m.i], Phase::Verify, &m.imports.join(", "));
    }
    // Task 0 is the listing; task k the imports of member k - 1.
    let tasks: Vec<Option<&[String]>> = std::iter::once(None)
        .chain(members.iter().map(|m| Some(m.imports.as_slice())))
        .collect();
    let answers = side_by_side::run_all(&tasks, cx.machine.cpus.max(1), |t| match t {
        None => python::probe(&cx.python, &[], cx.import_timeout),
        Some(imports) => python::probe_imports(&cx.python, imports, cx.import_timeout),
    });
    let mut answers = answers.into_iter();
    let mut facts = answers
        .next()
        .expect("the listing is task 0")
        .map_err(|e| format!("the verification probe failed: {e}"))?;
    for (m, answer) in members.iter().zip(answers) {
        let step = &steps[m.i];
        let mut own = answer.map_err(|e| format!("{}: the verification probe failed: {e}", step.name))?;
        let r = recipe_of(step, cx).map_err(|f| f.message.to_string())?;
        commit::judge(step, r, plan, cx, &m.imports, &mut own)
            .map_err(|(f, _)| format!("{}: {}", step.name, f.message))?;
        crate::crash_point::reached(&format!("verified {}", step.name));
        for (module, result) in own.imports {
            let known = facts.imports.get(&module).is_some_and(|r| !r.ok);
            if !known {
                facts.imports.insert(module, result);
            }
        }
        facts.smoke.extend(own.smoke);
        if facts.torch.is_none() {
            facts.torch = own.torch;
        }
    }
    Ok(facts)
}

/// The batch failed after its install: every member is uninstalled and its backup put back, so
/// the environment is as it was before the batch, and the members go back to install one by
/// one. A backup that cannot be put back fails the run on its step.
fn undo(members: Vec<Member>, steps: &[Step], cx: &Context, why: String) -> Batched {
    for m in members.iter().rev() {
        let step = &steps[m.i];
        let log = log_of(cx, step, Phase::Restore);
        let _ = cx.installer.uninstall(&cx.python, &m.dist).restoring().run_logged(&log);
        let own = commit::wheel_dist(&m.p).filter(|w| normalize(w) != normalize(&m.dist));
        if let Some(own) = &own {
            let _ = cx.installer.uninstall(&cx.python, own).restoring().run_logged(&log);
        }
        let restored = put_back(&m.dist, m.backup.as_ref(), &log);
        if let Restored::Failed { .. } = restored {
            let mut f = BuildFailure::new(&step.name, Phase::Install, StepError::Batch { why });
            f.restored = restored;
            return Batched::Failed(m.i, f);
        }
    }
    Batched::OneByOne(members.into_iter().map(|m| (m.i, m.p)).collect(), why)
}
