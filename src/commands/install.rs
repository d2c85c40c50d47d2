//! `kiln install`: carry out the plan, verifying each component before the next.

use std::process::ExitCode;

use super::{CmdResult, Failure, Session};
use crate::build::{self, Context, install::Installer};
use crate::cli::Global;
use crate::report;

pub fn run(g: &Global, targets: &[String], dry_run: bool) -> CmdResult {
    let s = Session::open(g, targets)?;
    let plan = match s.plan(g) {
        Ok(p) => p,
        Err(conflict) => return Err(super::conflict(g, &conflict)),
    };
    if dry_run {
        if g.json {
            report::json(&plan);
        } else {
            report::plan_human(&s, &plan);
        }
        return Ok(if plan.is_blocked() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    }
    if plan.is_blocked() {
        if g.json {
            report::json(&serde_json::json!({ "result": "blocked", "plan": plan }));
        } else {
            report::plan_human(&s, &plan);
        }
        return Err(Failure::User(
            "the plan is blocked (see above); nothing was changed".into(),
        ));
    }
    if plan.changes() == 0 {
        if g.json {
            report::json(&serde_json::json!({ "result": "nothing to do", "built": 0, "steps": plan.steps }));
        } else if !g.quiet {
            report::nothing_to_do(&plan);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cache = Session::cache_dir(g);
    let logs = cache.join("logs").join(build::run_stamp());
    let cx = Context {
        set: &s.set,
        machine: &s.machine,
        python: s.python.clone(),
        cache: cache.clone(),
        logs: logs.clone(),
        installer: Installer::detect(),
        jobs: g.jobs,
        import_timeout: std::time::Duration::from_secs(g.import_timeout.max(1)),
        facts: &s.facts,
    };
    let reporter = report::progress::Progress::new(g.no_progress || g.json, g.quiet);
    let result = build::execute(&plan, &cx, &reporter);
    drop(reporter);
    let outcomes = result.outcomes;
    match result.failure {
        None => {
            if g.json {
                report::json(&serde_json::json!({ "result": "ok", "logs": logs, "outcomes": outcomes }));
            } else if !g.quiet {
                report::install_done(&outcomes, &logs);
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(failure) => {
            if g.json {
                report::json(&serde_json::json!({
                    "result": "failed",
                    "logs": logs,
                    "outcomes": outcomes,
                    "failure": {
                        "name": failure.name, "phase": failure.phase, "message": failure.message,
                        "command": failure.command.as_ref().map(|c| &c.command),
                        "status": failure.command.as_ref().map(|c| &c.status),
                        "log": failure.command.as_ref().map(|c| &c.log),
                        "tail": failure.command.as_ref().map(|c| &c.tail),
                        "restored": failure.restored, "hint": failure.hint,
                    }
                }));
            } else {
                report::install_failed(&outcomes, &failure);
            }
            Err(Failure::Reported)
        }
    }
}
