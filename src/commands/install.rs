//! `kiln install`: carry out the plan, verifying each component before the next; with
//! `--locked`, pinned to a lockfile and checked against it afterwards; with `--bundle`, from a
//! bundle, offline. Only argument handling and reporting: choosing, building and comparing live
//! in `resolve`, `build` and `lock`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::str::FromStr;

use super::{CmdResult, Failure, Session};
use crate::build::{self, Context, install::Installer};
use crate::cli::Global;
use crate::lock::{self, Lock, LockError, Locked};
use crate::report;
use crate::resolve::{Plan, Status};

pub fn run(g: &Global, targets: &[String], dry_run: bool) -> CmdResult {
    let s = Session::open(g, targets)?;
    let plan = match s.plan(g) {
        Ok(p) => p,
        Err(conflict) => return Err(super::conflict(g, &conflict)),
    };
    let (result, json) = carry_out(g, &s, &plan, dry_run);
    if g.json {
        report::json(&json);
    }
    result
}

/// Runs the plan (or shows it, for `--dry-run`). Human output is printed here; the JSON
/// document is returned for the caller to print, so that `--locked` can add to it.
fn carry_out(g: &Global, s: &Session, plan: &Plan, dry_run: bool) -> (CmdResult, serde_json::Value) {
    if dry_run {
        if !g.json {
            report::plan_human(s, plan);
        }
        let code = if plan.is_blocked() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        };
        return (Ok(code), serde_json::to_value(plan).unwrap_or_default());
    }
    if plan.is_blocked() {
        if !g.json {
            report::plan_human(s, plan);
        }
        return (
            Err(Failure::User(
                "the plan is blocked (see above); nothing was changed".into(),
            )),
            serde_json::json!({ "result": "blocked", "plan": plan }),
        );
    }
    if plan.changes() == 0 {
        if !g.json && !g.quiet {
            report::nothing_to_do(plan);
        }
        return (
            Ok(ExitCode::SUCCESS),
            serde_json::json!({ "result": "nothing to do", "built": 0, "steps": plan.steps }),
        );
    }
    let cache = Session::cache_dir(g);
    let logs = cache.join("logs").join(build::run_stamp());
    let cx = Context {
        set: &s.set,
        machine: &s.machine,
        python: s.python.clone(),
        cache: cache.clone(),
        logs: logs.clone(),
        installer: Installer::detect().offline(g.offline),
        jobs: g.jobs,
        import_timeout: std::time::Duration::from_secs(g.import_timeout.max(1)),
        facts: &s.facts,
        offline: g.offline,
    };
    let progress = report::progress::Progress::new(g.no_progress || g.json, g.quiet);
    // The event log beside the step logs, and the timings report drawn from it.
    let events_path = logs.join("events.jsonl");
    let result = match build::events::EventLog::create(&events_path) {
        Ok(events) => build::execute(plan, &cx, &build::events::Tee(&progress, &events)),
        Err(_) => build::execute(plan, &cx, &progress),
    };
    drop(progress);
    let timings = logs.join("timings.html");
    let _ = std::fs::write(&timings, report::timings::html(&build::events::read(&events_path)));
    let outcomes = result.outcomes;
    match result.failure {
        None => {
            if !g.json && !g.quiet {
                report::install_done(&outcomes, &logs);
            }
            (
                Ok(ExitCode::SUCCESS),
                serde_json::json!({ "result": "ok", "logs": logs, "timings": timings, "outcomes": outcomes }),
            )
        }
        Some(failure) => {
            let all: Vec<&build::BuildFailure> = std::iter::once(&failure).chain(&result.more_failures).collect();
            if !g.json {
                report::install_failed(&outcomes, &all);
            }
            let describe = |f: &build::BuildFailure| {
                serde_json::json!({
                    "name": f.name, "phase": f.phase, "message": f.message,
                    "command": f.command.as_ref().map(|c| &c.command),
                    "status": f.command.as_ref().map(|c| &c.status),
                    "log": f.command.as_ref().map(|c| &c.log),
                    "tail": f.command.as_ref().map(|c| &c.tail),
                    "restored": f.restored, "hint": f.hint,
                })
            };
            let json = serde_json::json!({
                "result": "failed",
                "logs": logs,
                "timings": timings,
                "outcomes": outcomes,
                "failure": describe(&failure),
                "more_failures": result.more_failures.iter().map(describe).collect::<Vec<_>>(),
            });
            (Err(Failure::Reported), json)
        }
    }
}

/// `kiln install --locked`: the lock's versions as pins, its git commits and sdist hashes as
/// the sources, its archs as the target; a component built from another source than the lock
/// names is rebuilt; afterwards every locked field is compared with the environment.
pub fn run_locked(g: &Global, targets: &[String], dry_run: bool, path: &Path) -> CmdResult {
    let lock = read_lock(g, path)?;
    let pinned = locked_targets(&lock, targets, path)?;
    let mut g = g.clone();
    match &g.arch {
        None if !lock.environment.archs.is_empty() => g.arch = Some(lock.environment.archs.join(",")),
        None => {}
        Some(a) => {
            let given = crate::arch::parse_list(a).map_err(|e| Failure::Usage(e.to_string()))?;
            let given: Vec<String> = given.iter().map(|x| x.to_string()).collect();
            if given != lock.environment.archs {
                return Err(Failure::Usage(format!(
                    "--arch {a} differs from the archs {} locked them for ({}); leave --arch out to use the lock's",
                    path.display(),
                    lock.environment.archs.join(",")
                )));
            }
        }
    }
    let mut s = Session::open_with(&g, &pinned, |set| {
        lock::pin_sources(set, &lock).map_err(|problems| {
            Failure::User(format!(
                "{} cannot be reproduced with these recipes:\n  - {}\n  use the recipes it was made with (--recipes DIR), or install from these and write a new lock with `kiln lock`",
                path.display(),
                problems.join("\n  - ")
            ))
        })
    })?;
    let minor = |v: &str| v.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
    if minor(&s.facts.python.version) != minor(&lock.environment.python) {
        return Err(Failure::User(format!(
            "{} was made with Python {}; {} is Python {} (extensions are built per Python version); pass --python with a Python {} interpreter, or write a lock for this one with `kiln lock`",
            path.display(),
            lock.environment.python,
            s.python.display(),
            s.facts.python.version,
            minor(&lock.environment.python)
        )));
    }
    mark_other_sources_stale(&mut s, &lock, path);
    let plan = match s.plan(&g) {
        Ok(p) => p,
        Err(conflict) => return Err(super::conflict(&g, &conflict)),
    };
    let (result, mut json) = carry_out(&g, &s, &plan, dry_run);
    if dry_run || result.is_err() {
        if g.json {
            report::json(&json);
        }
        return result;
    }
    // Compare with what is there now, probed again.
    g.refresh = true;
    let after = Session::open(&g, &pinned)?;
    let found: BTreeMap<String, Locked> = lock
        .components
        .iter()
        .filter_map(|c| installed(&after, &c.name).map(|l| (c.name.clone(), l)))
        .collect();
    // Named targets reproduce part of the lock: compare that part (targets and what they need).
    let mut part = lock.clone();
    part.components
        .retain(|c| after.scope.iter().any(|(n, _)| *n == c.name));
    let differences = lock::differences(&part, &found);
    let failed = differences.iter().any(|d| !d.note_only);
    if g.json {
        json["lock"] = serde_json::json!({ "file": path, "reproduced": !failed, "differences": differences });
        report::json(&json);
    } else if !g.quiet || failed {
        report::lock_compared(path, part.components.len(), &differences);
    }
    if failed {
        return Err(Failure::Reported);
    }
    result
}

/// Reads a lockfile; a malformed one is reported at its line and column.
pub(super) fn read_lock(g: &Global, path: &Path) -> Result<Lock, Failure> {
    lock::read(path).map_err(|e| match e {
        LockError::Invalid(d) => {
            report::diagnostic(&d, g.json);
            Failure::Reported
        }
        other => Failure::User(other.to_string()),
    })
}

/// `kiln install --bundle FILE`: unpack the bundle into the cache, then reproduce its lock
/// offline.
pub fn run_bundle(g: &Global, targets: &[String], dry_run: bool, bundle: &Path) -> CmdResult {
    let cache = Session::cache_dir(g);
    let lock = crate::bundle::unpack(bundle, &cache).map_err(|e| Failure::User(e.to_string()))?;
    let mut g = g.clone();
    g.offline = true;
    run_locked(&g, targets, dry_run, &lock)
}

/// The targets of a locked install: the lock's components (or those named, which must be in
/// it), each pinned to its locked version.
fn locked_targets(lock: &Lock, targets: &[String], path: &Path) -> Result<Vec<String>, Failure> {
    if targets.is_empty() {
        return Ok(lock.components.iter().map(Locked::target).collect());
    }
    targets
        .iter()
        .map(|t| {
            let req = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(t).map_err(|e| {
                Failure::Usage(format!(
                    "`{t}` is not a target: {}",
                    e.to_string().lines().next().unwrap_or("")
                ))
            })?;
            if req.version_or_url.is_some() {
                return Err(Failure::Usage(format!(
                    "`{t}`: with --locked the version comes from {}; name the component only",
                    path.display()
                )));
            }
            let name = req.name.to_string();
            let mut locked = lock
                .components
                .iter()
                .find(|c| c.name == name)
                .cloned()
                .ok_or_else(|| {
                    Failure::Usage(format!(
                        "{name} is not in {}; `kiln lock {name}` adds it",
                        path.display()
                    ))
                })?;
            // The features it was locked with, and any the user names besides.
            for e in req.extras.iter().map(|e| e.to_string()) {
                if !locked.features.contains(&e) {
                    locked.features.push(e);
                }
            }
            Ok(locked.target())
        })
        .collect()
}

/// What is installed for component `name`, as a lock would record it.
fn installed(s: &Session, name: &str) -> Option<Locked> {
    s.installed(name).map(|d| Locked::of(name, d))
}

/// A component that is ok at the locked version but was built from another source than the
/// lock names is stale: the plan rebuilds it from the locked source.
fn mark_other_sources_stale(s: &mut Session, lock: &Lock, path: &Path) {
    let found: BTreeMap<String, Locked> = lock
        .components
        .iter()
        .filter_map(|c| installed(s, &c.name).map(|l| (c.name.clone(), l)))
        .collect();
    for a in s.assessments.iter_mut().filter(|a| a.status == Status::Ok) {
        let (Some(want), Some(have)) = (lock.components.iter().find(|c| c.name == a.name), found.get(&a.name)) else {
            continue;
        };
        if want.source != lock::NOT_BY_KILN
            && have.public_version() == want.public_version()
            && have.source != want.source
        {
            a.status = Status::Stale;
            a.evidence = format!("built from `{}`; {} has `{}`", have.source, path.display(), want.source);
        }
    }
}
