//! `kiln doctor`: machine facts and a status per component, with evidence.

use std::process::ExitCode;

use super::{CmdResult, Session};
use crate::cli::Global;
use crate::report;
use crate::resolve::Status;

pub fn run(g: &Global, targets: &[String]) -> CmdResult {
    let s = Session::open(g, targets)?;
    if g.json {
        report::json(&report::doctor_json(&s));
    } else if !g.quiet {
        report::doctor_human(&s);
    }
    let all_ok = s.assessments.iter().all(|a| a.status == Status::Ok);
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
