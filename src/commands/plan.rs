//! `kiln plan`: what `install` would do, in order, and why.

use std::path::Path;

use super::{CmdResult, conflict, exit, load_recipes, open};
use crate::report;
use crate::session::Session;
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String], for_node: Option<&Path>) -> CmdResult {
    let s = match for_node {
        Some(file) => Session::open_for(settings, load_recipes(settings)?, targets, file)?,
        None => open(settings, targets)?,
    };
    let plan = s.plan(settings).map_err(|c| conflict(settings, &c))?;
    if settings.json {
        report::json(&plan);
    } else if !settings.quiet {
        report::plan::human(&plan, &s.python, &s.facts.python.version);
    }
    Ok(exit(!plan.is_blocked()))
}
