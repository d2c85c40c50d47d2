//! The evidence a session judges by: the interpreter's facts, the CUDA binaries of the
//! distributions in scope and the smoke tests that can run here, from the probe cache when
//! nothing they depend on changed. It deliberately ignores what the evidence means (that is
//! `resolve::status`).

use std::path::Path;

use super::SessionError;
use crate::arch::Arch;
use crate::probe::cache::{CacheUse, Probed};
use crate::probe::smoke::{self, Script};
use crate::probe::{self, MachineFacts, python};
use crate::recipe::RecipeSet;
use crate::resolve;
use crate::settings::Settings;

/// What [`gather`] found.
pub(super) struct Found {
    pub probed: Probed,
    pub cache_use: CacheUse,
    /// The target archs a GPU here has: smoke tests ran only for these.
    pub smoke_archs: Vec<Arch>,
}

/// Probes `python` for the components in `scope` (their imports, binaries and smoke tests).
pub(super) fn gather(
    settings: &Settings,
    set: &RecipeSet,
    python: &Path,
    machine: &MachineFacts,
    archs: &[Arch],
    scope: &[(String, Vec<String>)],
) -> Result<Found, SessionError> {
    let imports = resolve::status::imports_for(set, scope);
    // Each component's own distribution and its former names (a renamed package installed under
    // its old name is judged by its binaries too).
    let dists: Vec<String> = scope
        .iter()
        .filter_map(|(name, _)| set.get(name))
        .flat_map(resolve::owners::names)
        .collect();
    let timeout = settings.import_timeout;
    // Smoke tests run only where a GPU of a target arch is present; which ones, their
    // scripts and those archs are part of the cache key.
    let smoke_archs = smoke::runnable_archs(&machine.gpu_archs(), archs);
    let smoke_recipes: Vec<&crate::recipe::Recipe> = if smoke_archs.is_empty() {
        Vec::new()
    } else {
        scope
            .iter()
            .filter_map(|(n, _)| set.get(n))
            .filter(|r| r.smoke.is_some())
            .collect()
    };
    let smoke_key: Vec<String> = smoke_recipes
        .iter()
        .map(|r| format!("{}\0{}", r.name, r.smoke.as_ref().map_or("", |s| s.text.as_str())))
        .chain(smoke_archs.iter().map(|a| a.to_string()))
        .collect();
    let scratch = settings.cache_dir.join("smoke");
    let (probed, cache_use) = probe::cache::python_facts(
        &settings.cache_dir,
        python,
        &imports,
        &dists,
        &smoke_key.join("\0"),
        settings.refresh,
        || {
            let facts = python::probe(python, &imports, timeout).map_err(|e| SessionError::Probe(e.to_string()))?;
            let binaries = dists
                .iter()
                .filter_map(|d| facts.dists.get(d).map(|dist| (d.clone(), probe::binaries::scan(dist))))
                .collect();
            // Only what is installed and imports: a smoke test cannot prove more than that
            // an import failed, which the probe already says.
            let smoke = smoke_recipes
                .iter()
                .filter(|r| resolve::status::installed_and_imports(r, &facts))
                .filter_map(|r| {
                    let s = r.smoke.as_ref()?;
                    let script = Script {
                        component: &r.name,
                        path: &s.path,
                        text: &s.text,
                    };
                    Some((r.name.clone(), smoke::run(python, &script, &scratch, timeout)))
                })
                .collect();
            Ok(Probed { facts, binaries, smoke })
        },
    )?;
    Ok(Found {
        probed,
        cache_use,
        smoke_archs,
    })
}
