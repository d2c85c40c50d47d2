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

use super::blame::Fault;
use super::commit::{self, StepDone};
use super::failure::{BuildFailure, Restored, StepError};
use super::fate::{put_back, uninstall_own, wheel_fate};
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
use crate::store::journal::Part;

/// What became of a batch.
pub(super) enum Batched {
    /// Every step installed, verified and recorded.
    Done(Vec<(usize, StepDone)>),
    /// Something failed (said in each step's install log): the environment is as it was
    /// before the batch, and each step goes back to install on its own.
    OneByOne(Vec<(usize, Prepared)>),
    /// The environment could not be put back after a failure: the run fails on this step.
    Failed(usize, BuildFailure),
    /// kiln was interrupted: the environment is as it was before the batch, and the run ends.
    Interrupted,
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

/// One step of a batch.
struct Member<'a> {
    i: usize,
    p: Prepared,
    r: &'a Recipe,
    dist: String,
    backup: Option<Backup>,
    imports: Vec<String>,
}

/// What a member's wheel kept in the wheel cache must be.
fn expected<'a>(dist: &'a str, step: &'a Step) -> wheels::Expected<'a> {
    wheels::Expected {
        dist,
        version: step.version.as_deref().unwrap_or_default(),
    }
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
    let mut members: Vec<Member> = Vec::new();
    let mut parts = Vec::new();
    let mut items = items.into_iter();
    while let Some((i, p)) = items.next() {
        let step = &steps[i];
        let Ok(r) = recipe_of(step, cx) else {
            let mut rest = vec![(i, p)];
            rest.extend(items);
            return back(members, rest, steps, cx, "a step has no recipe".into());
        };
        let dist = r.dist.clone().unwrap_or_else(|| r.name.clone());
        let installed = cx.facts.dists.get(&normalize(&dist));
        let backup_dir = p.work.join("backup");
        let backup = match replace::back_up(installed, &[], &backup_dir) {
            Ok(backup) => backup,
            Err(e) => {
                let why = format!("cannot back up {dist}: {e}");
                let mut rest = vec![(i, p)];
                rest.extend(items);
                return back(members, rest, steps, cx, why);
            }
        };
        let uninstall = cx.installer.uninstall(&cx.python, &dist).restoring();
        parts.push(Part::new(&step.name, &dist, backup.as_ref(), &backup_dir, &uninstall));
        let imports = commit::proof_imports(step, r, cx);
        members.push(Member {
            i,
            p,
            r,
            dist,
            backup,
            imports,
        });
    }
    let Some(install) = install_command(&members, steps, plan, cx) else {
        return back(members, Vec::new(), steps, cx, "cannot write the constraints".into());
    };
    // Written before site-packages changes: a kiln killed from here on is put back by the next.
    if let Err(e) = txn.begin_batch(parts) {
        let why = format!("cannot write the install journal: {e}");
        return back(members, Vec::new(), steps, cx, why);
    }
    let names: Vec<&str> = members.iter().map(|m| steps[m.i].name.as_str()).collect();
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
        return undo(
            members,
            steps,
            cx,
            reporter,
            format!("the install failed ({})", e.status),
        );
    }
    for n in &names {
        crate::crash_point::reached(&format!("installed {n}"));
    }
    let facts = match verify(&members, steps, plan, cx, reporter) {
        Ok(facts) => facts,
        Err(why) => return undo(members, steps, cx, reporter, why),
    };
    for m in &members {
        if let Err(f) = commit::record(&steps[m.i], m.r, plan, cx, &facts, &m.dist, &m.p) {
            return undo(members, steps, cx, reporter, f.message.to_string());
        }
    }
    if let Err(e) = txn.step_proven(&names) {
        return undo(
            members,
            steps,
            cx,
            reporter,
            format!("cannot write the install journal: {e}"),
        );
    }
    let done = members
        .into_iter()
        .map(|m| {
            let step = &steps[m.i];
            (
                m.i,
                commit::proven(step, cx, m.p, expected(&m.dist, step), facts.clone()),
            )
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
    if !members.iter().any(|m| m.r.install_deps) {
        return Some(cx.installer.install(&cx.python, &what, false, None, None));
    }
    let dists: Vec<&str> = members.iter().map(|m| m.dist.as_str()).collect();
    let mut own: Vec<String> = Vec::new();
    for m in members {
        for c in commit::own_constraints(&steps[m.i], m.r) {
            if !own.contains(&c) {
                own.push(c);
            }
        }
    }
    let constraints = commit::write_constraints(cx, plan, &dists, &own, &members[0].p.work).ok()?;
    cx.installer
        .install_with_missing(&cx.python, &what, &dists, &constraints, None)
}

/// Nothing changed yet: the batch goes back as it came (with the items not looked at).
fn back(members: Vec<Member>, rest: Vec<(usize, Prepared)>, steps: &[Step], cx: &Context, why: String) -> Batched {
    let mut items: Vec<(usize, Prepared)> = members.into_iter().map(|m| (m.i, m.p)).collect();
    items.extend(rest);
    one_by_one(items, steps, cx, &why)
}

/// The batch goes back to install one step at a time; each step's install log says why, and so
/// does its outcome's note.
fn one_by_one(mut items: Vec<(usize, Prepared)>, steps: &[Step], cx: &Context, why: &str) -> Batched {
    for (i, p) in &mut items {
        let log = format!("# installed in one call with the steps that finished with it, which failed: {why}\n");
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log_of(cx, &steps[*i], Phase::Install))
            .and_then(|mut f| std::io::Write::write_all(&mut f, log.as_bytes()));
        let note = format!("installed on its own after the batch it was in failed: {why}");
        p.note = Some(match p.note.take() {
            Some(n) => format!("{n}; {note}"),
            None => note,
        });
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
        let step = &steps[m.i];
        reporter.phase(step, Phase::Verify, &commit::verify_detail(step, m.r));
    }
    // Task 0 is the listing; task k the imports of member k - 1.
    let tasks: Vec<Option<&[String]>> = std::iter::once(None)
        .chain(members.iter().map(|m| Some(m.imports.as_slice())))
        .collect();
    // What the interpreters leave running ends with the batch's scope, on every thread.
    let scope = crate::process::group::current();
    let n = side_by_side::interpreters(cx.machine.cpus, crate::probe::machine::memory_available());
    let answers = side_by_side::run_all(&tasks, n, |t| {
        let _within = crate::process::group::within(scope);
        match t {
            None => python::probe(&cx.python, &[], cx.import_timeout),
            Some(imports) => python::probe_imports(&cx.python, imports, cx.import_timeout),
        }
    });
    let mut answers = answers.into_iter();
    let mut facts = answers
        .next()
        .expect("the listing is task 0")
        .map_err(|e| format!("the verification probe failed: {e}"))?;
    for (m, answer) in members.iter().zip(answers) {
        let step = &steps[m.i];
        let mut own = answer.map_err(|e| format!("{}: the verification probe failed: {e}", step.name))?;
        commit::judge(step, m.r, plan, cx, &m.imports, &mut own)
            .map_err(|(f, _)| format!("{}: {}", step.name, f.message))?;
        crate::crash_point::reached(&format!("verified {}", step.name));
        // Every import here ran (`judge` refused any that did not).
        facts.imports.extend(own.imports);
        facts.smoke.extend(own.smoke);
        if facts.torch.is_none() {
            facts.torch = own.torch;
        }
    }
    Ok(facts)
}

/// The batch failed after its install: every member is uninstalled and its backup put back, so
/// the environment is as it was before the batch, and the members go back to install one by
/// one. A backup that cannot be put back fails the run on its step (the others are still put
/// back). Interrupted, they do not go back: each wheel is kept unverified, as a step's wheel
/// whose verification was killed from outside, and the run ends.
fn undo(members: Vec<Member>, steps: &[Step], cx: &Context, reporter: &dyn Reporter, why: String) -> Batched {
    let mut failed = None;
    for m in members.iter().rev() {
        let step = &steps[m.i];
        reporter.phase(step, Phase::Restore, "putting the environment back");
        let log = log_of(cx, step, Phase::Restore);
        let _ = cx.installer.uninstall(&cx.python, &m.dist).restoring().run_logged(&log);
        let own = uninstall_own(cx, &m.p, &m.dist, &log);
        let restored = put_back(own.as_deref().unwrap_or(&m.dist), m.backup.as_ref(), &log);
        if let (Restored::Failed { .. }, None) = (&restored, &failed) {
            let mut f = BuildFailure::new(&step.name, Phase::Install, StepError::Batch { why: why.clone() });
            f.restored = restored;
            failed = Some((m.i, f));
        }
    }
    if let Some((i, f)) = failed {
        return Batched::Failed(i, f);
    }
    if crate::process::interrupted() {
        for m in &members {
            let fault = Fault::Outside("its install or verification was interrupted".into());
            let _ = wheel_fate(&cx.cache, &m.p, expected(&m.dist, &steps[m.i]), fault);
        }
        return Batched::Interrupted;
    }
    one_by_one(members.into_iter().map(|m| (m.i, m.p)).collect(), steps, cx, &why)
}
