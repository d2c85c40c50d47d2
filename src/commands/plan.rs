//! `kiln plan`: what `install` would do, in order, and why.

use super::{CmdResult, conflict, exit, open};
use crate::report;
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String]) -> CmdResult {
    let s = open(settings, targets)?;
    let plan = s.plan(settings).map_err(|c| conflict(settings, &c))?;
    if settings.json {
        report::json(&plan);
    } else if !settings.quiet {
        report::plan::human(&plan, &s.python, &s.facts.python.version);
    }
    Ok(exit(!plan.is_blocked()))
}
