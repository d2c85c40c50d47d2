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
        if !ev.asked.contains(name) && super::owners::provider(r, ev.python).is_none() {
            continue;
        }
        for d in r.depends_with(feats) {
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
