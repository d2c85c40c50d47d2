//! The evidence a session judges by: the interpreter's facts, the CUDA binaries of the
//! distributions in scope and the smoke tests that can run here, each part from the probe cache
//! while nothing it depends on changed (`probe::gather`). Here the recipes become the probe's
//! units: a component's imports (its features' included), the distributions of everything it
//! depends on (with every feature, so that one unit serves every target set) and its smoke test.
//! It deliberately ignores what the evidence means (that is `resolve::status`).

use std::path::Path;

use super::SessionError;
use crate::arch::Arch;
use crate::probe::cache::{CacheUse, Probed, Sources};
use crate::probe::gather::{self, Smoke, Unit};
use crate::probe::{self, MachineFacts};
use crate::recipe::{Recipe, RecipeSet};
use crate::resolve;
use crate::settings::Settings;

/// What [`gather`] found.
pub(super) struct Found {
    pub probed: Probed,
    pub cache_use: CacheUse,
    /// Where each part came from.
    pub sources: Sources,
    /// The target archs a GPU here has: smoke tests ran only for these.
    pub smoke_archs: Vec<Arch>,
}

/// Probes `python` for the components in `scope` (their imports, binaries and smoke tests);
/// `known`: what an install's last verification saw, whose imports need not be tried again
/// while the environment's listing is the same ([`gather::Request::known`]).
pub(super) fn gather(
    settings: &Settings,
    set: &RecipeSet,
    python: &Path,
    machine: &MachineFacts,
    archs: &[Arch],
    scope: &[(String, Vec<String>)],
    known: Option<&crate::probe::python::PythonFacts>,
) -> Result<Found, SessionError> {
    // Smoke tests run only where a GPU of a target arch is present and a driver here can drive
    // it; their scripts and those archs key their results.
    let smoke_archs = resolve::driver::smoke_archs(machine, archs);
    let units: Vec<Unit> = scope
        .iter()
        .filter_map(|(name, _)| set.get(name))
        .map(|r| unit(set, r, (!smoke_archs.is_empty()).then_some(smoke_archs.as_slice())))
        .collect();
    let dists: Vec<String> = scope
        .iter()
        .filter_map(|(name, _)| set.get(name))
        .flat_map(|r| {
            // A companion's CUDA binaries are judged with the component (its cubins).
            let companions = r.companions.iter().map(|c| probe::normalize(c));
            resolve::owners::names(r).chain(companions).collect::<Vec<_>>()
        })
        .collect();
    let scratch = settings.cache_dir.join("smoke");
    let request = gather::Request {
        cache: &settings.cache_dir,
        python,
        units: &units,
        binaries: &dists,
        // With a target arch, every installed distribution's binaries are read: those no
        // recipe manages are judged by them (`resolve::unmanaged`).
        every_distribution: !archs.is_empty(),
        per_import: settings.import_timeout,
        side_by_side: probe::side_by_side::interpreters(machine.cpus, machine.memory_available),
        refresh: settings.refresh,
        smoke_scratch: &scratch,
        watch: &settings.watch,
        known: known.filter(|_| !settings.refresh),
    };
    let (probed, sources) = gather::gather(&request).map_err(|e| SessionError::Probe(e.to_string()))?;
    Ok(Found {
        probed,
        cache_use: sources.overall(),
        sources,
        smoke_archs,
    })
}

/// The probe's view of recipe `r`; `smoke_archs` when its smoke test may run here.
fn unit(set: &RecipeSet, r: &Recipe, smoke_archs: Option<&[Arch]>) -> Unit {
    let imports = resolve::status::imports_for(set, &[(r.name.clone(), Vec::new())]);
    let every_feature = vec![(r.name.clone(), r.features.keys().cloned().collect())];
    let closure = set.closure(&every_feature);
    let mut dists: Vec<String> = closure
        .iter()
        .filter_map(|(n, _)| set.get(n)?.dist.as_deref().map(probe::normalize))
        .collect();
    let after = closure.into_iter().map(|(n, _)| n).filter(|n| *n != r.name).collect();
    dists.sort();
    dists.dedup();
    let smoke = smoke_archs.and_then(|archs| {
        let s = r.smoke.as_ref()?;
        Some(Smoke {
            path: s.path.clone(),
            text: s.text.clone(),
            key: probe::smoke::key(archs, &s.text),
            dist: probe::normalize(r.dist.as_deref().unwrap_or(&r.name)),
            needs: r.imports.clone(),
            // A version's own imports replace `[verify] imports` (vLLM 0.20.0 has no
            // `vllm._moe_C_stable_libtorch`, 0.33.0's): the smoke test needs those that
            // prove the installed version.
            needs_by_version: r
                .versions
                .iter()
                .filter_map(|e| Some((e.version.to_string(), e.imports.clone()?)))
                .collect(),
            serve: s.serve,
        })
    });
    Unit {
        name: r.name.clone(),
        imports,
        dists,
        after,
        smoke,
    }
}
