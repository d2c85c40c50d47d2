//! `kiln verify`: run the proofs again (no probe cache): imports, kernel images for the target,
//! build fingerprints and smoke tests, for the installed components (or those named). It
//! plans and changes nothing.

use super::{CmdResult, Failure, exit, open};
use crate::report::{self, verify};
use crate::resolve::{Assessment, Status};
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String]) -> CmdResult {
    let settings = Settings {
        refresh: true,
        ..settings.clone()
    };
    let s = open(&settings, targets)?;
    // Without targets: what is installed. With targets: them and what they need, installed or
    // not (a missing one is a failed proof).
    let checked: Vec<&Assessment> = s
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
    if settings.json {
        report::json_doc(&verify::Verified {
            components: &checked,
            probe_cache: s.probe_cache,
        });
    } else if !settings.quiet {
        verify::human(&checked);
    }
    Ok(exit(checked.iter().all(|a| a.status == Status::Ok)))
}
