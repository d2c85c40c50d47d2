//! Targets as the user wrote them (`sglang`, `flashinfer[cutedsl]`, `torch==2.14.1`), checked
//! against the recipes: a component, its features and a version pin each. It deliberately
//! ignores what the targets need (that is the recipe set's closure) and markers or URLs, which
//! a target cannot carry.

use std::collections::BTreeMap;
use std::str::FromStr;

use super::SessionError;
use crate::recipe::RecipeSet;

/// A version pin given with a target: the target as written, and its specifiers.
pub type Pin = (String, pep440_rs::VersionSpecifiers);

/// Targets as `(component, features)`, and the version pins given with them, by component.
/// No targets means every recipe.
pub type Targets = (Vec<(String, Vec<String>)>, BTreeMap<String, Pin>);

/// Reads `targets` against `set`; a target that names nothing known is a
/// [`SessionError::Usage`] that says what is known.
pub fn parse(set: &RecipeSet, targets: &[String]) -> Result<Targets, SessionError> {
    let mut pins = BTreeMap::new();
    if targets.is_empty() {
        return Ok((set.recipes.keys().map(|k| (k.clone(), Vec::new())).collect(), pins));
    }
    let mut out = Vec::new();
    for t in targets {
        let req = requirement(t)?;
        if req.marker != pep508_rs::MarkerTree::TRUE {
            return Err(SessionError::Usage(format!(
                "`{t}`: markers on targets are not supported"
            )));
        }
        let name = req.name.to_string();
        match &req.version_or_url {
            None => {}
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => {
                pins.insert(name.clone(), (t.trim().to_string(), s.clone()));
            }
            Some(pep508_rs::VersionOrUrl::Url(_)) => {
                return Err(SessionError::Usage(format!(
                    "`{t}`: URLs on targets are not supported; write a recipe with that source"
                )));
            }
        }
        let Some(r) = set.get(&name) else {
            let hint = set
                .closest(&name)
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            return Err(SessionError::Usage(format!(
                "no recipe named `{name}`{hint}; `kiln recipes` lists them"
            )));
        };
        let mut feats = Vec::new();
        for e in &req.extras {
            let f = e.to_string();
            if !r.features.contains_key(&f) {
                return Err(SessionError::Usage(format!(
                    "`{name}` has no feature `{f}` (it has: {})",
                    r.features.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            feats.push(f);
        }
        out.push((name, feats));
    }
    Ok((out, pins))
}

/// One target as a PEP 508 requirement; what does not parse is a [`SessionError::Usage`].
pub fn requirement(t: &str) -> Result<pep508_rs::Requirement<pep508_rs::VerbatimUrl>, SessionError> {
    pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(t).map_err(|e| {
        SessionError::Usage(format!(
            "`{t}` is not a target: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    })
}
