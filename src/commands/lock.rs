//! `kiln lock`: record a proven environment in a lockfile. It records what is installed and
//! proven, never what the recipes would choose: an environment with anything not `ok` is refused.

use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, open};
use crate::report::{self, lock::Locked};
use crate::session::locked::Unlockable;
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String], output: &Path) -> CmdResult {
    let mut s = open(settings, targets)?;
    // Without --arch, the archs kiln installed the components for, not the GPUs found here (a
    // connected machine that made a bundle for 9.0 and 12.0 has neither): proven for those.
    if settings.archs.is_none()
        && let Some(archs) = s.installed_archs().filter(|a| *a != s.archs)
    {
        let settings = Settings {
            archs: Some(archs),
            ..settings.clone()
        };
        s = open(&settings, targets)?;
    }
    let lock = match s.lock(!targets.is_empty()) {
        Ok(lock) => lock,
        Err(Unlockable::NotProven(refused)) => {
            let refused: Vec<String> = refused.iter().map(report::reason::refused).collect();
            if settings.json {
                report::json_doc(&Locked::Refused { because: &refused });
            }
            return Err(Failure::User(format!(
                "cannot lock an environment that is not proven; nothing was written:\n  - {}\n  `kiln install` fixes what it can; `kiln lock NAME...` locks only the named components",
                refused.join("\n  - ")
            )));
        }
        Err(Unlockable::Nothing) => {
            return Err(Failure::User(
                "nothing to lock: no component kiln knows is installed in this environment; `kiln install NAME` first"
                    .into(),
            ));
        }
    };
    crate::lock::write(output, &lock).map_err(|e| Failure::User(e.to_string()))?;
    if settings.json {
        report::json_doc(&Locked::Written {
            lockfile: output,
            lock: &lock,
        });
    } else if !settings.quiet {
        report::lock::written(output, &lock);
    }
    Ok(ExitCode::SUCCESS)
}
