//! `kiln verify`: run the proofs again (no probe cache): imports, kernel images for the target,
//! build fingerprints and smoke tests, for the installed components (or those named). It
//! plans and changes nothing.

use std::process::ExitCode;

use super::{CmdResult, Failure, Session};
use crate::cli::Global;
use crate::report;
use crate::resolve::Status;

pub fn run(g: &Global, targets: &[String]) -> CmdResult {
    let mut g = g.clone();
    g.refresh = true;
    let s = Session::open(&g, targets)?;
    // Without targets: what is installed. With targets: them and what they need, installed or
    // not (a missing one is a failed proof).
    let checked: Vec<&crate::resolve::Assessment> = s
        .assessments
        .iter()
        .filter(|a| !targets.is_empty() || a.version.is_some())
        .collect();
    if checked.is_empty() {
        return Err(Failure::User(
            "nothing to verify: no component kiln knows is installed in this environment; `kiln install NAME` first"
                .into(),
        ));
    }
    if g.json {
        report::json(&serde_json::json!({ "components": checked, "probe_cache": s.probe_cache }));
    } else if !g.quiet {
        report::verified(&checked);
    }
    let all_ok = checked.iter().all(|a| a.status == Status::Ok);
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
