//! `kiln install`: carry out the plan, verifying each component before the next, then judge the
//! environment it left as `kiln doctor` would right after (the same targets and archs, every
//! verdict: driver, binaries, companions, JIT proofs unless `--no-jit-proof`) and end with that
//! verdict, exit 1 when it is not ok; with
//! `--locked`, pinned to a lockfile and checked against it afterwards; with `--bundle`, from a
//! bundle, offline. With `--aot` (or `--aot-module`) the `[aot]` modules are compiled and
//! installed after the steps and before that verdict's proofs, so a serving proof finds them;
//! a failed AOT compile fails the run but does not stop the verdict. Only argument handling and
//! reporting: choosing, building and comparing live
//! in `session`, `resolve`, `build` and `lock`.

use std::cell::RefCell;
use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, conflict, exit, load_recipes, open, read_lock};
use crate::apply::{BuildFailure, StepResult};
use crate::probe::python::PythonFacts;
use crate::report;
use crate::report::install::{Failed, Install, LockCheck, document};
use crate::resolve::Plan;
use crate::session::aot::AotOutcome;
use crate::session::{JitStatus, Session, locked};
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String], dry_run: bool, aot: Option<&[String]>) -> CmdResult {
    let s = open(settings, targets)?;
    check_modules(&s, aot)?;
    let plan = s.plan(settings).map_err(|c| conflict(settings, &c))?;
    let warmed = RefCell::new(None);
    let judge = |verified: Option<&PythonFacts>| {
        warm_before_proofs(settings, &s, aot, dry_run, &warmed)?;
        // Modules written into the environment since the verification: it saw another one.
        let verified = verified.filter(|_| !wrote_modules(&warmed));
        Ok(Session::after_install(
            settings,
            load_recipes(settings)?,
            targets,
            verified,
        )?)
    };
    let (mut result, mut doc, _) = carry_out(settings, &s, &plan, dry_run, &judge);
    // Nothing was installed (so nothing was judged): the modules are compiled for what is there.
    if result.is_ok() {
        warm_before_proofs(settings, &s, aot, dry_run, &warmed)?;
    }
    attach_aot(&mut result, &mut doc, warmed.into_inner());
    if settings.json {
        report::install::json(doc, None);
    }
    result
}

/// What `--aot` did, once it ran.
type Warmed = RefCell<Option<Vec<AotOutcome>>>;

/// `--aot-module` names a module some `[aot]` recipe in scope knows, or the run stops here.
fn check_modules(s: &Session, aot: Option<&[String]>) -> Result<(), Failure> {
    let unknown = s.unknown_modules(aot.unwrap_or_default());
    if unknown.is_empty() {
        return Ok(());
    }
    let known: Vec<String> = s
        .aot_components()
        .iter()
        .filter_map(|n| s.set.get(n)?.aot.as_ref().map(|a| (n, a)))
        .map(|(n, a)| {
            format!(
                "{n}: {}",
                a.modules
                    .iter()
                    .chain(&a.on_request)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    Err(Failure::User(format!(
        "--aot-module {}: no component in scope compiles it ahead of time; {}",
        unknown.join(", "),
        if known.is_empty() {
            "none in scope has [aot] (`kiln recipes` shows which do)".to_string()
        } else {
            format!("known: {}", known.join("; "))
        }
    )))
}

/// `--aot`, once per run: the `[aot]` modules compiled (or taken from the cache) and installed
/// in a session of only the components that have them, so that no serving proof runs before
/// they are in place; reported as they finish.
fn warm_before_proofs(
    settings: &Settings,
    s: &Session,
    aot: Option<&[String]>,
    dry_run: bool,
    warmed: &Warmed,
) -> Result<(), Failure> {
    let Some(extra) = aot else { return Ok(()) };
    if dry_run || warmed.borrow().is_some() {
        return Ok(());
    }
    let w = Session::open(settings, load_recipes(settings)?, &s.aot_components())?;
    let outcomes = w.warm(settings, extra);
    if !settings.json && (!settings.quiet || outcomes.iter().any(|o| !o.ok)) {
        report::install::aot(&outcomes, &w.archs);
    }
    warmed.replace(Some(outcomes));
    Ok(())
}

/// The `--aot` outcomes into the JSON document; a module that failed fails the run.
fn attach_aot(result: &mut CmdResult, doc: &mut serde_json::Value, warmed: Option<Vec<AotOutcome>>) {
    let Some(outcomes) = warmed else { return };
    if outcomes.iter().any(|w| !w.ok) && result.is_ok() {
        *result = Err(Failure::Reported);
    }
    doc["aot"] = serde_json::to_value(&outcomes).unwrap_or_default();
}

/// Opens the session that judges the environment an install left, as `doctor` would, given
/// what the install's last verification saw.
type Judge<'a> = dyn Fn(Option<&PythonFacts>) -> Result<Session, Failure> + 'a;

/// Whether `--aot` installed a module into the environment (from its compile or the cache).
fn wrote_modules(warmed: &Warmed) -> bool {
    warmed
        .borrow()
        .as_ref()
        .is_some_and(|w| w.iter().any(|o| !o.modules.is_empty()))
}

/// Runs the plan (or shows it, for `--dry-run`), then judges the environment it left with
/// `judge`: the install ends with `doctor`'s verdict on the same targets and archs, and is ok
/// only when that is ok (an `outdated` component the plan keeps aside). Human output is printed
/// here; the JSON document is returned for the caller to print, so that `--locked` can add to
/// it, with the judging session when the run changed anything.
fn carry_out(
    settings: &Settings,
    s: &Session,
    plan: &Plan,
    dry_run: bool,
    judge: &Judge,
) -> (CmdResult, serde_json::Value, Option<Session>) {
    let show_plan = || report::plan::human(plan, &s.python, &s.facts.python.version);
    if dry_run {
        if !settings.json {
            show_plan();
        }
        return (Ok(exit(!plan.is_blocked())), document(&Install::Plan(plan)), None);
    }
    if plan.is_blocked() {
        if !settings.json {
            show_plan();
        }
        let blocked = Failure::User("the plan is blocked (see above); nothing was changed".into());
        return (Err(blocked), document(&Install::Blocked { plan }), None);
    }
    if plan.changes() == 0 {
        let not_ok = s.not_ok_after(plan);
        if !settings.json && !settings.quiet {
            report::install::nothing_to_do(plan);
        }
        if !settings.json {
            report::install::verdict(&not_ok);
        }
        let doc = Install::NothingToDo {
            built: 0,
            steps: &plan.steps,
            components: &s.assessments,
        };
        return (Ok(exit(not_ok.is_empty())), document(&doc), None);
    }
    let progress = report::progress::Progress::new(!settings.progress || settings.json, settings.quiet);
    let run = s.execute(settings, plan, &progress);
    drop(progress);
    // The timings report, drawn from the event log beside the step logs.
    let timings = run.logs.join("timings.html");
    let _ = std::fs::write(
        &timings,
        report::timings::html(&crate::apply::events::read(&run.events)),
    );
    let outcomes = &run.report.outcomes;
    let (logs, timings) = (&run.logs, &timings);
    let Some(failure) = &run.report.failure else {
        let changed: Vec<&str> = outcomes
            .iter()
            .filter(|o| o.result == StepResult::Done)
            .map(|o| o.name.as_str())
            .collect();
        // What compiles its kernels at run time is proven now, as `doctor` proves it: a
        // component that imports but cannot compile a kernel for the target is not ok.
        let proving: Vec<&str> = changed
            .iter()
            .copied()
            .filter(|n| s.set.get(n).is_some_and(|r| r.jit.is_some()))
            .collect();
        if settings.jit_proof && !proving.is_empty() && !s.archs.is_empty() && !settings.json && !settings.quiet {
            report::install::proving(&proving, &s.archs);
        }
        // `doctor`'s verdict on the environment as the install left it.
        let after = match judge(run.report.facts.as_ref()) {
            Ok(after) => after,
            Err(e) => {
                let doc = Install::NotOk {
                    logs,
                    timings,
                    outcomes,
                    jit: &[],
                    components: &[],
                };
                return (Err(e), document(&doc), None);
            }
        };
        let jit = after.jit_verdicts(settings, &changed);
        let not_ok = after.not_ok_after(plan);
        if !settings.json {
            if !settings.quiet {
                report::install::done(outcomes, logs, &not_ok);
            }
            report::install::jit(&jit, settings.quiet);
            report::install::served(&after.assessments, &changed, settings.quiet);
            report::install::verdict(&not_ok);
        }
        let ok = not_ok.is_empty()
            && jit
                .iter()
                .all(|v| matches!(v.status, JitStatus::Ok | JitStatus::Skipped));
        let (jit, components) = (&jit[..], &after.assessments[..]);
        let (result, doc) = if ok {
            let doc = Install::Done {
                logs,
                timings,
                outcomes,
                jit,
                components,
            };
            (Ok(ExitCode::SUCCESS), doc)
        } else {
            let doc = Install::NotOk {
                logs,
                timings,
                outcomes,
                jit,
                components,
            };
            (Err(Failure::Reported), doc)
        };
        let doc = document(&doc);
        return (result, doc, Some(after));
    };
    let more = &run.report.more_failures;
    if !settings.json {
        let all: Vec<&BuildFailure> = std::iter::once(failure).chain(more).collect();
        report::install::failed(outcomes, &all, run.report.undo.as_ref());
    }
    let doc = Install::Failed {
        logs,
        timings,
        outcomes,
        failure: Failed::of(failure),
        more_failures: more.iter().map(Failed::of).collect(),
        undo: run.report.undo.as_ref(),
    };
    (Err(Failure::Reported), document(&doc), None)
}

/// `kiln install --locked`: the lock's versions as pins, its git commits and sdist hashes as
/// the sources, its archs as the target; a component built from another source than the lock
/// names is rebuilt; afterwards every locked field is compared with the environment.
pub fn run_locked(
    settings: &Settings,
    targets: &[String],
    dry_run: bool,
    path: &Path,
    aot: Option<&[String]>,
) -> CmdResult {
    let lock = read_lock(settings, path)?;
    let pinned = locked::targets(&lock, targets, path)?;
    let (archs, from) = locked::archs(&lock, settings.archs.as_deref());
    if !settings.json && !settings.quiet {
        report::install::locked_archs(path, archs.as_deref(), from, &locked::archs_of(&lock).0);
    }
    let settings = Settings {
        archs,
        ..settings.clone()
    };
    let mut set = load_recipes(&settings)?;
    locked::pin(&mut set, &lock, path)?;
    let mut s = Session::open(&settings, set, &pinned)?;
    s.check_python(&lock, path)?;
    s.check_brought(&lock, path)?;
    s.mark_other_sources_stale(&lock, path);
    // Built for other archs, the wheels are not the lock's: none is expected by its hash.
    if from != locked::ArchsFrom::Overridden {
        s.expect_locked_wheels(&lock);
    }
    check_modules(&s, aot)?;
    let plan = s.plan(&settings).map_err(|c| conflict(&settings, &c))?;
    // What is there afterwards, probed again: judged as `doctor` judges it, and compared.
    let probed_again = Settings {
        refresh: true,
        ..settings.clone()
    };
    let warmed = RefCell::new(None);
    let judge = |_: Option<&PythonFacts>| {
        warm_before_proofs(&probed_again, &s, aot, dry_run, &warmed)?;
        Ok(Session::after_install(
            &probed_again,
            load_recipes(&probed_again)?,
            &pinned,
            None,
        )?)
    };
    let (mut result, mut doc, after) = carry_out(&settings, &s, &plan, dry_run, &judge);
    if result.is_ok() {
        warm_before_proofs(&probed_again, &s, aot, dry_run, &warmed)?;
    }
    attach_aot(&mut result, &mut doc, warmed.into_inner());
    doc["archs_from"] = serde_json::json!(report::install::archs_from(from));
    let installed = result.is_ok() || after.is_some();
    if dry_run || !installed {
        if settings.json {
            report::install::json(doc, None);
        }
        return result;
    }
    let after = match after {
        Some(after) => after,
        None => open(&probed_again, &pinned)?,
    };
    let targeted = (from == locked::ArchsFrom::Overridden)
        .then_some(settings.archs.as_deref())
        .flatten();
    let (compared, differences) = after.compare(&lock, targeted);
    let failed = differences.iter().any(|d| !d.note_only);
    if settings.json {
        let check = LockCheck {
            file: path,
            reproduced: !failed,
            differences: &differences,
        };
        report::install::json(doc, Some(&check));
    } else if !settings.quiet || failed {
        report::install::lock_compared(path, compared, &differences, lock.environment.planned_for.is_some());
    }
    if failed {
        return Err(Failure::Reported);
    }
    // A lock planned for this node (`kiln bundle --for`) is proven only now: write the lock of
    // what is here, as `kiln lock` would.
    if lock.environment.planned_for.is_some() {
        write_proven(&settings, &after)?;
    }
    result
}

/// Writes `kiln.lock` of the proven environment after a planned bundle installed, or says
/// which component is not proven (and writes nothing).
fn write_proven(settings: &Settings, after: &Session) -> CmdResult {
    let out = Path::new(crate::settings::DEFAULT_LOCK_FILE);
    match after.lock(false) {
        Ok(proven) => {
            crate::lock::write(out, &proven).map_err(|e| Failure::User(e.to_string()))?;
            if !settings.json && !settings.quiet {
                report::install::proven_lock(out, proven.components.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(locked::Unlockable::NotProven(refused)) => {
            let refused: Vec<String> = refused.iter().map(report::reason::refused).collect();
            Err(Failure::User(format!(
                "installed as planned, but not proven here, so no kiln.lock was written:\n  - {}\n  fix what is named (`kiln doctor` shows it), then `kiln lock` writes the proven lock",
                refused.join("\n  - ")
            )))
        }
        Err(locked::Unlockable::Nothing) => Ok(ExitCode::SUCCESS),
    }
}

/// `kiln install --bundle FILE`: unpack the bundle into the cache, then reproduce its lock
/// offline.
pub fn run_bundle(
    settings: &Settings,
    targets: &[String],
    dry_run: bool,
    bundle: &Path,
    aot: Option<&[String]>,
) -> CmdResult {
    let cache = &settings.cache_dir;
    let set = load_recipes(settings)?;
    let lock = crate::bundle::unpack(bundle, cache, &set, &settings.watch).map_err(|e| Failure::User(e.to_string()))?;
    let settings = Settings {
        offline: true,
        ..settings.clone()
    };
    run_locked(&settings, targets, dry_run, &lock, aot)
}
