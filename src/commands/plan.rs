//! `kiln plan`: what `install` would do, in order, and why.

use std::process::ExitCode;

use super::{CmdResult, Session};
use crate::cli::Global;
use crate::report;

pub fn run(g: &Global, targets: &[String]) -> CmdResult {
    let s = Session::open(g, targets)?;
    let plan = match s.plan(g) {
        Ok(p) => p,
        Err(conflict) => return Err(super::conflict(g, &conflict)),
    };
    if g.json {
        report::json(&plan);
    } else if !g.quiet {
        report::plan_human(&s, &plan);
    }
    Ok(if plan.is_blocked() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
