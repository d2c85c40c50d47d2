//! Why there is no solution, and what the user can do about it.
//!
//! Owns the wording of a failed solve: the external facts at the leaves of PubGrub's derivation
//! tree become short lines a person can follow ("vllm 0.33.0 needs flashinfer ==0.7.2.post1"),
//! in the order PubGrub found them, each once; and the ways out kiln knows (allow replacing an
//! adopted component, drop a pin, build from source against the torch present) are each tried
//! by solving again, and offered only when they work. Deliberately ignores the derived steps in
//! between (the leaves say it all, and the chain stays short) and any relaxation kiln cannot
//! check by solving (it is never offered).

use std::collections::BTreeSet;

use pubgrub::{DerivationTree, External};

use super::provider::{Cands, Compiled, MAX_CANDIDATES, available};
use super::world::{Id, Origin, ROOT_ID, World};
use super::{Request, solve, solve_plain};
use crate::probe::python::PythonFacts;
use crate::recipe::RecipeSet;

pub(super) type Tree = DerivationTree<Id, Cands, String>;

/// Why no candidate of `p` is acceptable: it is adopted, or none of the known versions fits.
fn why_none(world: &World<'_>, p: &str, wanted: &str) -> String {
    match world.adopted.get(p) {
        Some(v) => format!("{p} {v} is installed and adopted; kiln does not replace it (--allow-replace {p})"),
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

/// The external facts at the leaves of the derivation tree, as lines a person can follow.
pub(super) fn because(c: &Compiled, tree: &Tree) -> Vec<String> {
    let world = c.world;
    let mut leaves = Vec::new();
    collect(tree, &mut leaves);
    let mut lines: Vec<String> = Vec::new();
    for e in leaves {
        let line = match e {
            External::FromDependencyOf(p, _, d, _) if p == ROOT_ID => {
                let d = c.name(d);
                world
                    .root_reasons
                    .get(d)
                    .cloned()
                    .unwrap_or_else(|| format!("you asked for {d}"))
            }
            External::FromDependencyOf(p, pv, d, dr) => {
                // A requirement no candidate of `d` meets: say why there is none.
                let none_fits = dr.0 & available(world.candidates(d).len()) == 0;
                let versions = c.versions_text(p, &pv);
                // The specifier as written, from the first version of `p` in the set.
                let first = (0..MAX_CANDIDATES as u32).find(|i| pv.0 & (1 << i) != 0);
                let (text, installed) = match first {
                    Some(i) => (world.spec_text(p, i, d), world.origin(p, i) == Some(Origin::Installed)),
                    None => ("", false),
                };
                let text = if text.is_empty() { "(any version)" } else { text };
                let (p, d) = (c.name(p), c.name(d));
                let edge = if installed {
                    format!("{p} {versions} is installed, and its metadata requires {d} {text}")
                } else {
                    format!("{p} {versions} needs {d} {text}")
                };
                if none_fits {
                    if !lines.contains(&edge) {
                        lines.push(edge);
                    }
                    why_none(world, d, &format!("satisfies {text}"))
                } else {
                    edge
                }
            }
            External::NoVersions(p, _) => why_none(world, c.name(p), "fits"),
            External::Custom(p, _, m) => format!("{}: {m}", c.name(p)),
            External::NotRoot(..) => continue,
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
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

/// What the user can do: each relaxation kiln can try is tried, and offered only if it works.
pub(super) fn ways_out(set: &RecipeSet, py: &PythonFacts, req: &Request, c: &Compiled, tree: &Tree) -> Vec<String> {
    let world = c.world;
    let mut leaves = Vec::new();
    collect(tree, &mut leaves);
    let mut involved: BTreeSet<String> = BTreeSet::new();
    for e in &leaves {
        match e {
            External::FromDependencyOf(p, _, d, _) => {
                involved.insert(c.name(*p).to_string());
                involved.insert(c.name(*d).to_string());
            }
            External::NoVersions(p, _) | External::Custom(p, _, _) => {
                involved.insert(c.name(*p).to_string());
            }
            External::NotRoot(..) => {}
        }
    }
    let mut out = Vec::new();
    let targets: Vec<String> = req
        .targets
        .iter()
        .map(|(n, f)| match req.pins.get(n) {
            Some((text, _)) => format!("'{text}'"),
            None if f.is_empty() => n.clone(),
            None => format!("'{n}[{}]'", f.join(",")),
        })
        .collect();
    // Allow replacing an adopted component.
    for name in involved.iter().filter(|n| world.adopted.contains_key(*n)) {
        let mut relaxed = req.clone();
        relaxed.allow_replace.insert(name.clone());
        if let Ok(sol) = solve(set, py, &relaxed) {
            let dependents = set
                .recipes
                .values()
                .filter(|r| r.depends_all().any(|d| d.abi && &d.name == name) && sol.chosen.contains_key(&r.name))
                .count();
            out.push(format!(
                "allow replacing {name} {} with {}: `kiln plan {} --allow-replace {name}` ({dependents} component{} built against it would be rebuilt)",
                world.adopted[name],
                sol.chosen.get(name).map_or("?", String::as_str),
                targets.join(" "),
                if dependents == 1 { "" } else { "s" }
            ));
        }
    }
    // Drop a user pin; when no single one helps, all of those involved.
    let pinned: Vec<&String> = involved.iter().filter(|n| req.pins.contains_key(*n)).collect();
    let mut dropped_one = false;
    for name in &pinned {
        let mut relaxed = req.clone();
        let (text, _) = relaxed.pins.remove(*name).expect("checked above");
        if solve_plain(set, py, &relaxed).is_ok() {
            out.push(format!("drop the pin `{text}` and let kiln choose {name}"));
            dropped_one = true;
        }
    }
    if !dropped_one && pinned.len() > 1 {
        let mut relaxed = req.clone();
        let texts: Vec<String> = pinned
            .iter()
            .filter_map(|n| relaxed.pins.remove(*n).map(|(t, _)| format!("`{t}`")))
            .collect();
        if let Ok(sol) = solve(set, py, &relaxed) {
            let chosen: Vec<String> = pinned
                .iter()
                .filter_map(|n| sol.chosen.get(*n).map(|v| format!("{n} {v}")))
                .collect();
            out.push(format!(
                "drop the pins {} together: kiln then chooses {}",
                texts.join(" and "),
                chosen.join(", ")
            ));
        }
    }
    // Build a consumer from source against what is installed, where its recipe can (only
    // worth saying when torch is part of the conflict).
    for name in involved.iter().filter(|_| involved.contains("torch")).filter(|n| {
        set.get(n).is_some_and(|r| {
            r.build
                .prepare
                .iter()
                .flatten()
                .any(|t| t.raw().contains("use_existing_torch"))
        })
    }) {
        out.push(format!("{name} is built from source against the torch that is present (its use_existing_torch path); its recipe's torch range is what must fit"));
    }
    out
}
