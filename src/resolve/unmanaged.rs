//! Distributions no recipe manages, judged by their CUDA binaries alone: after an install,
//! whatever `[install] deps` (or the user) brought into the environment — sgl-deep-ep behind
//! SGLang, a kernel package pip put there — is read for the target archs like a component's own
//! binaries (per binary, run rules, [`super::kernels`]), so that one lacking an arch is named
//! even though kiln has no recipe for it.
//!
//! A distribution is managed when some recipe of the set names it: its `dist`, a `former` name
//! or a `companions` entry (judged with that component). Without a recipe nothing is optional:
//! every CUDA binary is required. It deliberately judges only binaries (no imports, versions or
//! smoke tests: there is no recipe to say what those should be) and ignores distributions that
//! hold no CUDA code.

use std::collections::{BTreeMap, BTreeSet};

use super::kernels::{self, Rules};
use super::reason::{Reason, status_of};
use super::status::Status;
use crate::arch::Arch;
use crate::probe::binaries::Binaries;
use crate::probe::python::PythonFacts;
use crate::probe::{MachineFacts, normalize};
use crate::recipe::RecipeSet;

/// The verdict on one unmanaged distribution with CUDA binaries. Its JSON form (with the
/// rendered `evidence`) is in `report::json`.
#[derive(Debug, Clone)]
pub struct Unmanaged {
    pub dist: String,
    pub version: String,
    /// The most severe of `reasons`: `wrong-arch` when a binary lacks a target arch.
    pub status: Status,
    /// [`Reason::NotManaged`], then the per-binary verdict.
    pub reasons: Vec<Reason>,
}

/// Every distribution name (normalized) some recipe of `set` manages.
pub fn managed(set: &RecipeSet) -> BTreeSet<String> {
    set.recipes
        .values()
        .flat_map(|r| {
            r.dist
                .iter()
                .chain(r.former.iter())
                .chain(r.companions.iter())
                .map(|d| normalize(d))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The distributions of `python` that no recipe of `set` manages and whose binaries (in
/// `binaries`, by normalized name) hold CUDA code, each judged for `archs`; empty without a
/// target arch. In name order.
pub fn judge(
    set: &RecipeSet,
    python: &PythonFacts,
    binaries: &BTreeMap<String, Binaries>,
    machine: &MachineFacts,
    archs: &[Arch],
) -> Vec<Unmanaged> {
    if archs.is_empty() {
        return Vec::new();
    }
    let managed = managed(set);
    let driver = machine.driver_cuda.as_ref().map(|d| &d.value);
    python
        .dists
        .iter()
        .filter(|(name, _)| !managed.contains(*name))
        .filter_map(|(name, dist)| {
            let bins = binaries.get(name).filter(|b| !b.cuda.is_empty())?;
            let files = super::status::relative_files(bins, dist);
            let mut check = kernels::check(&files, archs, driver, &Rules::default());
            check.unreadable = bins.unreadable.clone();
            let reasons = vec![
                Reason::NotManaged {
                    dist: dist.name.clone(),
                    version: dist.version.clone(),
                },
                check.reason(),
            ];
            Some(Unmanaged {
                dist: dist.name.clone(),
                version: dist.version.clone(),
                status: status_of(&reasons),
                reasons,
            })
        })
        .collect()
}
