//! Installing built steps together: where more than one finished build waits for its install
//! (builds that ended together, wheels taken from the cache), their wheels go in with one
//! installer call and are proven side by side — each component's imports in a fresh interpreter
//! of its own, as a step's own verification has them, so that no component is proven by what
//! another loaded — beside one listing of the environment; smoke tests then run one at a time
//! (they share the GPU) and each step is recorded as `commit` records it.
//!
//! Only in a run that is one transaction (a failure rolls every step back anyway, and the run's
//! snapshot undoes the batch after a kill), and only for steps whose install is the wheel
//! alone or the wheel with its runtime dependencies added where missing (every kiln-managed
//! distribution but the batch's pinned, as for a step alone; uv does that in one call, pip
//! needs two, so with pip such steps install one at a time): nothing replaced under another
//! name, no run-time environment file, no index of its own. Anything that fails sends the
//! batch back, the wheels uninstalled and their backups put back (dependencies the batch's
//! install added stay, within the same constraints, and go with the rest if the run fails), to
//! install one step at a time (`commit`), which then says which step failed and why: a batch
//! never reports a failure of its own unless putting the environment back fails.
//!
//! It deliberately ignores when builds finish (`queue` hands over those waiting) and how a
//! step's failure is reported (`commit` does that on the way back).

use std::collections::VecDeque;

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
use crate::process::Cmd;
use crate::recipe::Recipe;
use crate::resolve::{Plan, Step};
use crate::store::backup::Backup;

/// What became of a batch.
pub(super) enum Batched {
    /// Every step installed, verified and recorded.
    Done(Vec<(usize, StepDone)>),
    /// Something failed (said in each step's install log): the environment is as it was
    /// before the batch, and each step goes back to install on its own.
    OneByOne(Vec<(usize, Prepared)>),
    /// The environment could not be put back after a failure: the run fails on this step.
    Failed(usize, BuildFailure),
}

/// Finished builds waiting for their install, in the order they finished.
pub(super) type Ready = VecDeque<(usize, Result<Prepared, BuildFailure>)>;

/// Takes from `ready` the builds to install as one batch: every one that may, with the first
/// one's way of installing (with its runtime dependencies or without), where there are two or
/// more and no build in `ready` failed (a failure is reported first, in order).
pub(super) fn take(ready: &mut Ready, steps: &[Step], cx: &Context) -> Option<Vec<(usize, Prepared)>> {
    if cx.keep_done || ready.len() < 2 || ready.iter().any(|(_, p)| p.is_err()) {
        return None;
    }
    let kinds: Vec<Option<bool>> = ready
        .iter()
        .map(|(i, p)| p.as_ref().ok().and_then(|p| kind(&steps[*i], cx, p)))
        .collect();
    let first = kinds.iter().flatten().next().copied()?;
    if kinds.iter().filter(|k| **k == Some(first)).count() < 2 {
        return None;
    }
    let mut taken = Vec::new();
    let mut rest = Ready::new();
    for ((i, p), k) in ready.drain(..).zip(kinds) {
        match (k == Some(first), p) {
            (true, Ok(p)) => taken.push((i, p)),
            (_, p) => rest.push_back((i, p)),
        }
    }
    *ready = rest;
    Some(taken)
}

/// How `step` (built as `p`) installs in a batch, `Some(with its runtime dependencies)`, or
/// `None` where it cannot: its install is more than its wheel (a distribution replaced under
/// another name, a run-time environment file, an index of its own), or its dependencies would
/// take pip a second call.
fn kind(step: &Step, cx: &Context, p: &Prepared) -> Option<bool> {
    let r = cx.set.get(&step.name)?;
    let alone = step.runtime_env.is_empty() && p.index_url.is_none() && replace::replaced(r, cx.facts).is_empty();
    (alone && (!r.install_deps || cx.installer.adds_missing_in_one_call())).then_some(r.install_deps)
}

/// One step of a batch, as far as it got.
struct Member {
    i: usize,
    p: Prepared,
    dist: String,
    backup: Option<Backup>,
    imports: Vec<String>,
}

/// Installs, verifies and records `items` (from [`take`]) together; see the module doc.
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
            return back(members, items.collect(), steps, cx, "a step has no recipe".into());
        };
        let dist = r.dist.clone().unwrap_or_else(|| r.name.clone());
        let installed = cx.facts.dists.get(&normalize(&dist));
        let imports = commit::proof_imports(step, r, cx);
        match replace::back_up(installed, &[], &p.work.join("backup")) {
            Ok(backup) => members.push(member(i, p, dist, backup, imports)),
            Err(e) => {
                let why = format!("cannot back up {dist}: {e}");
                members.push(member(i, p, dist, None, imports));
                return back(members, items.collect(), steps, cx, why);
            }
        }
    }
    let names: Vec<String> = members.iter().map(|m| steps[m.i].name.clone()).collect();
    let Some(install) = install_command(&members, steps, plan, cx) else {
        return back(members, Vec::new(), steps, cx, "cannot write the constraints".into());
    };
    if let Err(e) = txn.begin_batch(&names) {
        return back(
            members,
            Vec::new(),
            steps,
            cx,
            format!("cannot write the install journal: {e}"),
        );
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
    let installed = install.run_logged(&logs[0]);
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

/// The one installer call for the batch: the wheels alone, or (the batch's members install
/// their runtime dependencies) with what they need added where missing, every kiln-managed
/// distribution but these pinned, as a step installed alone has it. `None`: the constraints
/// could not be written.
fn install_command(members: &[Member], steps: &[Step], plan: &Plan, cx: &Context) -> Option<Cmd> {
    let what: Vec<String> = members.iter().map(|m| m.p.to_install.clone()).collect();
    let recipes: Vec<&Recipe> = members.iter().filter_map(|m| cx.set.get(&steps[m.i].name)).collect();
    if !recipes.iter().any(|r| r.install_deps) {
        return Some(cx.installer.install(&cx.python, &what, false, None, None));
    }
    let dists: Vec<&str> = members.iter().map(|m| m.dist.as_str()).collect();
    let mut own: Vec<String> = Vec::new();
    for (m, r) in members.iter().zip(&recipes) {
        for c in commit::own_constraints(&steps[m.i], r) {
            if !own.contains(&c) {
                own.push(c);
            }
        }
    }
    let constraints = commit::write_constraints(cx, plan, &dists, &own, &members[0].p.work).ok()?;
    cx.installer
        .install_with_missing(&cx.python, &what, &dists, &constraints, None)
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
fn back(members: Vec<Member>, rest: Vec<(usize, Prepared)>, steps: &[Step], cx: &Context, why: String) -> Batched {
    let mut items: Vec<(usize, Prepared)> = members.into_iter().map(|m| (m.i, m.p)).collect();
    items.extend(rest);
    one_by_one(items, steps, cx, &why)
}

/// The batch goes back to install one step at a time; each step's install log says why.
fn one_by_one(items: Vec<(usize, Prepared)>, steps: &[Step], cx: &Context, why: &str) -> Batched {
    for (i, _) in &items {
        let note = format!(
            "# installed together with the builds that finished with it, that failed: {why}\n# now installed on its own\n"
        );
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log_of(cx, &steps[*i], Phase::Install))
            .and_then(|mut f| std::io::Write::write_all(&mut f, note.as_bytes()));
    }
    Batched::OneByOne(items)
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
    one_by_one(members.into_iter().map(|m| (m.i, m.p)).collect(), steps, cx, &why)
}
