//! Which requirements judge a component's version: its recipe's `accepts`, and the requirement
//! each dependent puts on it, but only a dependent that is installed or asked for (a target or
//! something a target needs). A recipe in scope that is neither says nothing of what is
//! installed: with no target every recipe is in scope, and flash-attn's `torch < 2.14`
//! (recipes/flash-attn.toml) must not make an installed torch 2.14.1 `outdated` where nobody
//! installed or named flash-attn. A component's `companions` (distributions it uses only at
//! exactly its own version) installed at another version are named too. It deliberately
//! ignores the installed distributions' own `Requires-Dist` (the solver weighs those).

use std::collections::BTreeMap;
use std::str::FromStr;

use pep440_rs::Version;

use super::reason::Reason;
use super::status::Evidence;
use crate::recipe::Recipe;

/// A version constraint a dependent puts on a component.
pub struct Constraint<'a> {
    from: &'a str,
    text: &'a str,
    spec: &'a pep440_rs::VersionSpecifiers,
}

/// The constraints on each component, by name, from the components of `scope` that are
/// installed or asked for.
pub fn collect<'a>(ev: &Evidence<'a>, scope: &'a [(String, Vec<String>)]) -> BTreeMap<&'a str, Vec<Constraint<'a>>> {
    let mut out: BTreeMap<&str, Vec<Constraint>> = BTreeMap::new();
    for (name, feats) in scope {
        let Some(r) = ev.set.get(name) else { continue };
        let installed = super::owners::provider(r, ev.python);
        if !ev.asked.contains(name) && installed.is_none() {
            continue;
        }
        // The pins of the version that is there (a version's own pins replace the recipe's and
        // its features' of the same name), as the solver takes them.
        let version = installed.and_then(|f| Version::from_str(f.dist.version.split('+').next()?).ok());
        for d in r.depends_of(version.as_ref(), feats) {
            if let (Some(text), Some(spec)) = (&d.version, &d.spec) {
                out.entry(d.name.as_str()).or_default().push(Constraint {
                    from: &r.name,
                    text,
                    spec,
                });
            }
        }
    }
    out
}

/// The version checks: the recipe's `accepts`, and each dependent's requirement in scope.
pub fn version_reasons(r: &Recipe, dist: &crate::probe::python::Dist, constraints: &[Constraint]) -> Vec<Reason> {
    let Ok(v) = Version::from_str(&dist.version) else {
        return vec![Reason::VersionUnreadable {
            version: dist.version.clone(),
        }];
    };
    let mut out = Vec::new();
    if !r.accepts_version(&v) {
        out.push(Reason::VersionNotAccepted {
            component: r.name.clone(),
            have: dist.version.clone(),
            accepts: r.accepts_text(),
            by: None,
        });
    }
    for c in constraints.iter().filter(|c| !c.spec.contains(&v)) {
        out.push(Reason::VersionNotAccepted {
            component: r.name.clone(),
            have: dist.version.clone(),
            accepts: c.text.to_string(),
            by: Some(c.from.to_string()),
        });
    }
    out
}

/// Each of the recipe's companions installed at another version than `dist`'s: the component
/// ignores it ([`Reason::CompanionIgnored`]).
pub fn companion_reasons(
    r: &Recipe,
    dist: &crate::probe::python::Dist,
    py: &crate::probe::python::PythonFacts,
) -> Vec<Reason> {
    r.companions
        .iter()
        .filter_map(|c| py.dists.get(&crate::probe::normalize(c)))
        .filter(|c| c.version != dist.version)
        .map(|c| Reason::CompanionIgnored {
            component: r.name.clone(),
            version: dist.version.clone(),
            companion: c.name.clone(),
            companion_version: c.version.clone(),
            source: r.companions_why.clone(),
        })
        .collect()
}

/// The per-arch verdict on the CUDA binaries of each companion the component uses (installed at
/// exactly its version; one it ignores is [`companion_reasons`]'), read by the fatbin and cubin
/// reader like a component's own: for each target arch, the files that hold an image loading
/// there ([`Reason::CompanionImagesHeld`]), or none ([`Reason::CompanionImagesMissing`], with the
/// images it holds). A companion without CUDA binaries, or no target arch: nothing.
pub fn companion_images(r: &Recipe, dist: &crate::probe::python::Dist, ev: &super::status::Evidence) -> Vec<Reason> {
    let driver = ev.machine.driver_cuda.as_ref().map(|d| &d.value);
    let mut out = Vec::new();
    for c in r
        .companions
        .iter()
        .filter_map(|c| ev.python.dists.get(&crate::probe::normalize(c)))
        .filter(|c| c.version == dist.version)
    {
        let Some(bins) = ev
            .binaries
            .get(&crate::probe::normalize(&c.name))
            .filter(|b| !b.cuda.is_empty())
        else {
            continue;
        };
        for &arch in ev.archs {
            let files = bins
                .cuda
                .iter()
                .filter(|f| crate::probe::binaries::runs_on(f, arch, driver).usable)
                .count();
            out.push(if files > 0 {
                Reason::CompanionImagesHeld {
                    companion: c.name.clone(),
                    companion_version: c.version.clone(),
                    arch,
                    files,
                    of: bins.cuda.len(),
                }
            } else {
                let mut held: Vec<String> = bins.cuda.iter().flat_map(|f| f.images().map(|i| i.name())).collect();
                held.sort();
                held.dedup();
                Reason::CompanionImagesMissing {
                    component: r.name.clone(),
                    companion: c.name.clone(),
                    companion_version: c.version.clone(),
                    arch,
                    held,
                }
            });
        }
    }
    out
}

/// The recipe's `[[limits]]` that hold for the installed version on the target archs, as notes.
pub fn arch_limits(r: &Recipe, dist: &crate::probe::python::Dist, archs: &[crate::arch::Arch]) -> Vec<Reason> {
    let version = dist
        .version
        .split('+')
        .next()
        .and_then(|v| pep440_rs::Version::from_str(v).ok());
    r.limits
        .iter()
        .filter(|l| l.holds_for(version.as_ref()))
        .filter_map(|l| {
            let on: Vec<crate::arch::Arch> = archs.iter().filter(|a| l.arch.contains(a)).copied().collect();
            (!on.is_empty()).then(|| Reason::ArchLimits {
                component: r.name.clone(),
                version: dist.version.clone(),
                archs: on,
                lacks: l.lacks.clone(),
                source: l.why.clone(),
            })
        })
        .collect()
}
