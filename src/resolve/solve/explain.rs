//! Why there is no solution, in lines a person can check.
//!
//! Owns the wording of a failed solve: the external facts at the leaves of PubGrub's derivation
//! tree become short lines ("vllm 0.33.0 needs flashinfer ==0.7.2.post1"), in the order PubGrub
//! found them, each once. Every line is made from the constraint that produced it, per version:
//! PubGrub merges the versions of a package that depend on the same set of candidates ("sglang
//! 0.5.23 or 0.5.11 depends on no torch there is"), so the versions of such a merge are split
//! again by what each one's own dependency list says, and each specifier is named with its
//! source (the recipe, or an installed distribution's metadata). A line never suggests a fix:
//! the ways out (`ways`) are proven by solving again, a reason is not. Deliberately ignores the
//! derived steps in between (the leaves say it all, and the chain stays short).

use pubgrub::{DerivationTree, External};

use super::provider::{Cands, Compiled, MAX_CANDIDATES, available};
use super::world::{Id, Origin, ROOT_ID, World};
use crate::recipe::RecipeSet;

pub(super) type Tree = DerivationTree<Id, Cands, String>;

/// The line for an installed component that kiln keeps (under which distribution, when not its
/// own): it names no flag, since whether allowing the replacement helps is for a second solve
/// to say.
fn adopted_line(world: &World<'_>, p: &str, v: &pep440_rs::Version) -> String {
    let dist = match world.installed_as.get(p) {
        Some(d) => format!(" (as {d})"),
        None => String::new(),
    };
    format!("{p} {v} is installed{dist} and adopted: kiln keeps an installed component unless it may replace it")
}

/// Why no candidate of `p` is acceptable: it is adopted, or none of the known versions fits.
fn why_none(world: &World<'_>, p: &str, wanted: &str) -> String {
    match world.adopted.get(p) {
        Some(v) => adopted_line(world, p, v),
        None => {
            let offered: Vec<String> = world.candidates_of(p).iter().map(|v| v.to_string()).collect();
            let known = if offered.is_empty() {
                "none".to_string()
            } else {
                offered.join(", ")
            };
            format!("no version of {p} that kiln knows {wanted} (known: {known})")
        }
    }
}

/// What one candidate says about a dependency: whether it is the installed distribution, and
/// each specifier on the dependency with whether the distribution's metadata says it.
type Says<'w> = (bool, Vec<(&'w str, bool)>);

/// The candidates of `p` in `pv`, grouped by what each says about `d` (in order of preference).
fn per_version<'w>(world: &'w World<'w>, p: Id, pv: &Cands, d: Id) -> Vec<(Says<'w>, Vec<u32>)> {
    let n = world.candidates(p).len().min(MAX_CANDIDATES) as u32;
    let mut groups: Vec<(Says<'w>, Vec<u32>)> = Vec::new();
    for i in (0..n).filter(|i| pv.0 & (1 << i) != 0) {
        let says = (world.origin(p, i) == Some(Origin::Installed), world.spec_texts(p, i, d));
        match groups.iter_mut().find(|(s, _)| *s == says) {
            Some((_, is)) => is.push(i),
            None => groups.push((says, vec![i])),
        }
    }
    groups
}

/// `text`, or "(any version)" for an empty specifier.
fn spec_or_any(text: &str) -> &str {
    if text.is_empty() { "(any version)" } else { text }
}

/// The line for versions `versions` of `p` that say `says` about `d`.
fn edge_line(p: &str, versions: &str, d: &str, says: &Says<'_>) -> String {
    let (installed, specs) = says;
    let join = |meta: bool| {
        let texts: Vec<&str> = specs
            .iter()
            .filter(|(_, m)| *m == meta)
            .map(|(t, _)| spec_or_any(t))
            .collect();
        texts.join(" and ")
    };
    let (from_meta, from_recipe) = (join(true), join(false));
    match (installed, from_meta.is_empty(), from_recipe.is_empty()) {
        (true, false, true) => format!("{p} {versions} is installed, and its metadata requires {d} {from_meta}"),
        (true, false, false) => format!(
            "{p} {versions} is installed, and its metadata requires {d} {from_meta}; its recipe needs {d} {from_recipe}"
        ),
        (true, true, _) => format!("{p} {versions} is installed, and its recipe needs {d} {from_recipe}"),
        (false, _, _) => format!("{p} {versions} needs {d} {}", spec_or_any(&from_recipe)),
    }
}

/// The external facts at the leaves of the derivation tree, as lines a person can follow.
pub(super) fn because(c: &Compiled, tree: &Tree) -> Vec<String> {
    let world = c.world;
    let mut lines: Vec<String> = Vec::new();
    let mut push = |line: String| {
        if !lines.contains(&line) {
            lines.push(line);
        }
    };
    for e in leaves(tree) {
        match e {
            External::FromDependencyOf(p, _, d, _) if p == ROOT_ID => {
                let d = c.name(d);
                push(match world.adopted.get(d) {
                    Some(v) => adopted_line(world, d, v),
                    None => world
                        .root_reasons
                        .get(d)
                        .cloned()
                        .unwrap_or_else(|| format!("you asked for {d}")),
                });
            }
            External::FromDependencyOf(p, pv, d, dr) => {
                // A requirement no candidate of `d` meets: after the edge, say why there is none.
                let none_fits = dr.0 & available(world.candidates(d).len()) == 0;
                for (says, is) in per_version(world, p, &pv, d) {
                    let versions: Vec<String> = is
                        .iter()
                        .filter_map(|&i| c.version(p, i).map(|v| v.to_string()))
                        .collect();
                    push(edge_line(c.name(p), &versions.join(" or "), c.name(d), &says));
                    if none_fits {
                        for (text, _) in &says.1 {
                            push(why_none(world, c.name(d), &format!("satisfies {}", spec_or_any(text))));
                        }
                    }
                }
            }
            External::NoVersions(p, _) => push(why_none(world, c.name(p), "fits")),
            External::Custom(p, _, m) => push(format!("{}: {m}", c.name(p))),
            External::NotRoot(..) => {}
        }
    }
    lines
}

/// Facts that help read the reasons: a consumer built from source against the torch that is
/// present (its `use_existing_torch` step), where torch takes part, has its recipe's torch range
/// to fit, not its released wheel's pin.
pub(super) fn notes(set: &RecipeSet, c: &Compiled, tree: &Tree) -> Vec<String> {
    let involved = involved(c, tree);
    if !involved.iter().any(|n| n == "torch") {
        return Vec::new();
    }
    involved
        .iter()
        .filter(|n| {
            set.get(n).is_some_and(|r| {
                r.build
                    .prepare
                    .iter()
                    .flatten()
                    .any(|t| t.raw().contains("use_existing_torch"))
            })
        })
        .map(|n| format!("{n} is built from source against the torch that is present (its use_existing_torch step): its recipe's torch range is what must fit, not the pin of its released wheel"))
        .collect()
}

/// The external facts at the leaves of `tree`, in the order PubGrub found them.
pub(super) fn leaves(tree: &Tree) -> Vec<External<Id, Cands, String>> {
    let mut out = Vec::new();
    collect(tree, &mut out);
    out
}

fn collect(tree: &Tree, out: &mut Vec<External<Id, Cands, String>>) {
    match tree {
        DerivationTree::External(e) => out.push(e.clone()),
        DerivationTree::Derived(d) => {
            collect(&d.cause1, out);
            collect(&d.cause2, out);
        }
    }
}

/// The packages the leaves of `tree` name (the request itself left out), sorted, each once.
pub(super) fn involved(c: &Compiled, tree: &Tree) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in leaves(tree) {
        let ids = match e {
            External::FromDependencyOf(p, _, d, _) => vec![p, d],
            External::NoVersions(p, _) | External::Custom(p, _, _) => vec![p],
            External::NotRoot(..) => Vec::new(),
        };
        for p in ids.into_iter().filter(|p| *p != ROOT_ID) {
            out.push(c.name(p).to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}
