//! `kiln install`: carry out the plan, verifying each component before the next, then judge the
//! environment it left as `kiln doctor` would right after (the same targets and archs, every
//! verdict: driver, binaries, companions, JIT proofs unless `--no-jit-proof`) and end with that
//! verdict, exit 1 when it is not ok; with
//! `--locked`, pinned to a lockfile and checked against it afterwards; with `--bundle`, from a
//! bundle, offline. Only argument handling and reporting: choosing, building and comparing live
//! in `session`, `resolve`, `build` and `lock`.

use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, conflict, exit, load_recipes, open, read_lock};
use crate::build::{BuildFailure, StepResult};
use crate::report;
use crate::report::install::{Failed, Install, LockCheck, document};
use crate::resolve::Plan;
use crate::session::{JitStatus, Session, locked};
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String], dry_run: bool, aot: bool) -> CmdResult {
    let s = open(settings, targets)?;
    let plan = s.plan(settings).map_err(|c| conflict(settings, &c))?;
    let judge = || Ok(Session::after_install(settings, load_recipes(settings)?, targets)?);
    let (mut result, mut doc, after) = carry_out(settings, &s, &plan, dry_run, &judge);
    if aot && !dry_run && result.is_ok() {
        // The environment as the install left it (the probe cache sees the change).
        let after = after.unwrap_or(s);
        let warmed = after.warm(settings);
        if !settings.json && !settings.quiet {
            report::install::aot(&warmed, &after.archs);
        }
        if warmed.iter().any(|w| !w.ok) {
            if !settings.json && settings.quiet {
                report::install::aot(&warmed, &after.archs);
            }
            result = Err(Failure::Reported);
        }
        doc["aot"] = serde_json::to_value(&warmed).unwrap_or_default();
    }
    if settings.json {
        report::install::json(doc, None);
    }
    result
}

/// Opens the session that judges the environment an install left, as `doctor` would.
type Judge<'a> = dyn Fn() -> Result<Session, Failure> + 'a;

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
        report::timings::html(&crate::build::events::read(&run.events)),
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
        let after = match judge() {
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
pub fn run_locked(settings: &Settings, targets: &[String], dry_run: bool, path: &Path) -> CmdResult {
    let lock = read_lock(settings, path)?;
    let pinned = locked::targets(&lock, targets, path)?;
    let (archs, from) = locked::archs(&lock, settings.archs.as_deref(), path)?;
    if !settings.json && !settings.quiet {
        report::install::locked_archs(path, archs.as_deref(), from);
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
    s.expect_locked_wheels(&lock);
    let plan = s.plan(&settings).map_err(|c| conflict(&settings, &c))?;
    // What is there afterwards, probed again: judged as `doctor` judges it, and compared.
    let probed_again = Settings {
        refresh: true,
        ..settings.clone()
    };
    let judge = || {
        Ok(Session::after_install(
            &probed_again,
            load_recipes(&probed_again)?,
            &pinned,
        )?)
    };
    let (result, mut doc, after) = carry_out(&settings, &s, &plan, dry_run, &judge);
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
    let (compared, differences) = after.compare(&lock);
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
pub fn run_bundle(settings: &Settings, targets: &[String], dry_run: bool, bundle: &Path) -> CmdResult {
    let cache = &settings.cache_dir;
    let set = load_recipes(settings)?;
    let lock = crate::bundle::unpack(bundle, cache, &set).map_err(|e| Failure::User(e.to_string()))?;
    let settings = Settings {
        offline: true,
        ..settings.clone()
    };
    run_locked(&settings, targets, dry_run, &lock)
}
