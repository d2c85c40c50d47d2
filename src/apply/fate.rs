//! What becomes of a step's wheel, build tree and backup once its install is over: a proven
//! step's wheel is kept in the wheel cache and its build tree removed; a failed one's backup is
//! put back, and its wheel kept unverified or not as [`super::blame`] judges the failure.
//!
//! It deliberately ignores how the step installed and what its verification ran (`commit` and
//! `batch` do that).

use std::path::{Path, PathBuf};

use super::blame::{self, Blame, Fault};
use super::failure::{Restored, WheelFate};
use super::step::Prepared;
use super::{Context, wheels};
use crate::probe::normalize;
use crate::store::backup::Backup;

/// Puts the backup back after the failed install was uninstalled; says what was done.
pub(super) fn put_back(dist: &str, backup: Option<&Backup>, log: &Path) -> Restored {
    match backup {
        None => Restored::Removed { dist: dist.to_string() },
        Some(b) => match b.restore() {
            Ok(()) => Restored::Restored {
                dist: dist.to_string(),
                files: b.len(),
            },
            Err(error) => Restored::Failed {
                error: Box::new(error),
                log: log.to_path_buf(),
            },
        },
    }
}

/// What becomes of the wheel after a failed verification: kept unverified when the failure is
/// outside it ([`blame`]); a wheel that fails in its own files is not kept (and an unverified
/// cache entry it came from is removed). A cached wheel some run verified stays as it is.
pub(super) fn wheel_fate(cache: &Path, p: &Prepared, is: wheels::Expected, fault: Fault) -> Option<WheelFate> {
    let wheel = p.wheel.as_ref()?;
    if p.from_cache && p.unverified.is_none() {
        return None;
    }
    match blame::judge(fault, wheel) {
        Blame::Own(why) => {
            if let (true, Some((key, _))) = (p.from_cache, &p.cache_entry) {
                let _ = wheels::forget_unverified(cache, key);
            }
            Some(WheelFate::Own { why })
        }
        Blame::Outside(why) => {
            let Some((key, inputs)) = &p.cache_entry else {
                let error = "what decides its binary is not all known (an ABI dependency's fingerprint)".into();
                return Some(WheelFate::NotKept { why, error });
            };
            Some(match wheels::store_unverified(cache, key, inputs, wheel, is, &why) {
                Ok(path) => WheelFate::Kept { path, why },
                Err(e) => WheelFate::NotKept {
                    why,
                    error: e.to_string(),
                },
            })
        }
    }
}

/// Keeps a verified wheel in the wheel cache (an unverified entry it came from is verified
/// now); returns where the wheel now is. A cache that cannot be written costs a later rebuild,
/// not this install: said in the wheel log.
pub(super) fn keep_wheel(cache: &Path, p: &Prepared, is: wheels::Expected, wheel_log: &Path) -> Option<PathBuf> {
    let verified_before = p.from_cache && p.unverified.is_none();
    let (false, Some((key, inputs)), Some(w)) = (verified_before, &p.cache_entry, &p.wheel) else {
        return p.wheel.clone();
    };
    match wheels::store(cache, key, inputs, w, is) {
        Ok(kept) => Some(kept),
        Err(e) => {
            let note = format!("\n# not kept in the wheel cache: {e}\n");
            let _ = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(wheel_log)
                .and_then(|mut f| std::io::Write::write_all(&mut f, note.as_bytes()));
            p.wheel.clone()
        }
    }
}

/// The build tree (sources, objects, the build-requirements overlay) is most of the disk a
/// build takes: gone once the component is proven, all of it unless the wheel still lives there.
pub(super) fn clean_up(work: &Path, wheel: Option<&Path>) {
    let _ = std::fs::remove_dir_all(work.join("src"));
    let _ = std::fs::remove_dir_all(work.join("build-requires"));
    if wheel.is_none_or(|w| !w.starts_with(work)) {
        let _ = std::fs::remove_dir_all(work);
    }
}

/// After the step's own distribution was uninstalled: the wheel may name itself otherwise than
/// the recipe's `dist`, and what it installed goes too, or it would stay while the report says it
/// was removed. Returns that other name.
pub(super) fn uninstall_own(cx: &Context, p: &Prepared, dist: &str, log: &Path) -> Option<String> {
    let own = wheel_dist(p).filter(|w| normalize(w) != normalize(dist))?;
    let _ = cx.installer.uninstall(&cx.python, &own).restoring().run_logged(log);
    Some(own)
}

/// The distribution the prepared wheel installs, by its own name: a wheel file's first
/// field (`name-version-...whl`, PEP 427) or an index requirement's name.
fn wheel_dist(p: &Prepared) -> Option<String> {
    match &p.wheel {
        Some(w) => Some(w.file_name()?.to_str()?.split('-').next()?.to_string()),
        None => {
            let req =
                <pep508_rs::Requirement<pep508_rs::VerbatimUrl> as std::str::FromStr>::from_str(&p.to_install).ok()?;
            Some(req.name.to_string())
        }
    }
}
