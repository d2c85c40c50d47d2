//! Replacing a component installed under other names: the distributions of its former names
//! (`sgl-kernel` for `sglang-kernel`) and any other distribution with files in the import
//! packages it owns alone are backed up with the component's own files, into the one backup the
//! install journal records, and uninstalled before the component goes in; a failed step (or the
//! next kiln, after a kill) uninstalls what went in and puts every one of them back. It
//! deliberately ignores which of them the new wheel overwrites: every file each `RECORD` lists is
//! copied.

use std::path::Path;

use super::commit::Failed;
use super::failure::BuildFailure;
use super::step::log_of;
use super::{Context, Phase};
use crate::probe::normalize;
use crate::probe::python::{self, PythonFacts};
use crate::recipe::Recipe;
use crate::resolve::Step;
use crate::store::backup::{Backup, BackupError};

/// The installed distributions as one phrase ("sglang-kernel and sgl-kernel"): what a restore
/// put back.
pub(super) fn names(installed: Option<&python::Dist>, replaced: &[&python::Dist]) -> String {
    let all: Vec<&str> = installed
        .into_iter()
        .chain(replaced.iter().copied())
        .map(|d| d.name.as_str())
        .collect();
    all.join(" and ")
}

/// The installed distributions other than the component's own that an install of it replaces:
/// those of its former names and those with files in the import packages it owns alone
/// ([`crate::resolve::owners`]; the owners are read from the `RECORD`s as they are now).
pub(super) fn replaced<'a>(r: &Recipe, facts: &'a PythonFacts) -> Vec<&'a python::Dist> {
    if r.former.is_empty() && r.import_packages.is_empty() {
        return Vec::new();
    }
    let mut now = facts.clone();
    crate::probe::owners::fill(&mut now, &r.import_packages);
    let own = r.dist.as_deref().map(normalize);
    crate::resolve::owners::found(r, &now)
        .iter()
        .map(|f| normalize(&f.dist.name))
        .filter(|n| Some(n) != own.as_ref())
        .filter_map(|n| facts.dists.get(&n))
        .collect()
}

/// Copies of the component's installed files and of every distribution it replaces, as one
/// backup (`None`: nothing is installed under any of its names).
pub(super) fn back_up(
    installed: Option<&python::Dist>,
    replaced: &[&python::Dist],
    dir: &Path,
) -> Result<Option<Backup>, BackupError> {
    let mut backup = installed.map(|d| of(d, dir)).transpose()?;
    for (i, old) in replaced.iter().enumerate() {
        let b = of(old, &dir.join(format!("replaced-{i}")))?;
        backup = Some(match backup {
            Some(mine) => mine.join(b),
            None => b,
        });
    }
    Ok(backup)
}

/// A backup of the installed distribution `d` into `dir`.
pub(super) fn of(d: &python::Dist, dir: &Path) -> Result<Backup, BackupError> {
    Backup::take(&d.name, d.dist_info.as_deref(), d.location.as_deref(), dir)
}

/// Uninstalls what the component replaces (its former distribution), before the component goes
/// in: two distributions in one package directory is what an install must not leave.
pub(super) fn remove(step: &Step, cx: &Context, replaced: &[&python::Dist]) -> Result<(), Failed> {
    let log = log_of(cx, step, Phase::Install);
    for old in replaced {
        cx.installer
            .uninstall(&cx.python, &old.name)
            .run_logged(&log)
            .map_err(|e| (BuildFailure::of_command(&step.name, Phase::Install, e), None))?;
    }
    Ok(())
}
