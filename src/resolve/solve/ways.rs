//! The ways out of a conflict: changes to the request the user may make (allow replacing an
//! adopted component, drop a version pin), each proven by solving again, and each offered only
//! when that solve found a solution.
//!
//! Owns the search for them: first each change alone (one `--allow-replace`, one pin dropped);
//! when none works alone, every change the conflict involves at once, then also every change the
//! next conflict involves (allowing torch to move may show that flashinfer must move too), until
//! a solve succeeds or a conflict involves nothing new; a set that works is cut down to the
//! changes it needs. What was solved again without a solution is recorded as `tried`, so that
//! "no way out" is said only after a second solve. Deliberately ignores relaxations kiln
//! cannot check by solving (editing a recipe), and how the user's command line looked: the
//! command that takes a way out is made from the user's own arguments by
//! [`super::Conflict::for_command`].

use std::collections::{BTreeMap, BTreeSet};

use pubgrub::PubGrubError;

use super::explain::{Tree, involved};
use super::provider::Compiled;
use super::world::World;
use super::{DroppedPin, Request, WayOut};
use crate::probe::python::PythonFacts;
use crate::recipe::RecipeSet;

/// What [`ways_out`] found.
pub(super) struct Relaxed {
    pub found: Vec<WayOut>,
    pub tried: Vec<String>,
}

/// One change to the request: components allowed to be replaced, pins dropped (by component).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Change {
    allow: BTreeSet<String>,
    drop: BTreeSet<String>,
}

impl Change {
    fn len(&self) -> usize {
        self.allow.len() + self.drop.len()
    }

    /// The request with this change made.
    fn apply(&self, req: &Request) -> Request {
        let mut r = req.clone();
        r.allow_replace.extend(self.allow.iter().cloned());
        r.pins.retain(|n, _| !self.drop.contains(n));
        r
    }

    /// As flags and pins, for `tried`.
    fn label(&self, req: &Request) -> String {
        let allow = self.allow.iter().map(|n| format!("--allow-replace {n}"));
        let drop = self
            .drop
            .iter()
            .filter_map(|n| req.pins.get(n))
            .map(|(text, _)| format!("without the pin `{text}`"));
        allow.chain(drop).collect::<Vec<_>>().join(" ")
    }
}

/// A second solve: the chosen versions, or the adopted components and pinned components the
/// new conflict involves.
fn attempt(
    set: &RecipeSet,
    py: &PythonFacts,
    req: &Request,
) -> Result<BTreeMap<String, String>, (BTreeSet<String>, BTreeSet<String>)> {
    let world = World::build(set, py, req);
    let compiled = Compiled::new(&world);
    match compiled.solve() {
        Ok(chosen) => Ok(compiled.chosen_text(&chosen)),
        Err(PubGrubError::NoSolution(tree)) => Err(relaxable(&compiled, req, &tree)),
        Err(_) => Err(Default::default()),
    }
}

/// What in a conflict the user may relax: the adopted components and the pinned ones it involves.
fn relaxable(c: &Compiled, req: &Request, tree: &Tree) -> (BTreeSet<String>, BTreeSet<String>) {
    let names = involved(c, tree);
    let adopted = names
        .iter()
        .filter(|n| c.world.adopted.contains_key(*n))
        .cloned()
        .collect();
    let pinned = names.iter().filter(|n| req.pins.contains_key(*n)).cloned().collect();
    (adopted, pinned)
}

/// What the user can do: each change kiln can try is tried, and offered only if it works.
pub(super) fn ways_out(set: &RecipeSet, py: &PythonFacts, req: &Request, c: &Compiled, tree: &Tree) -> Relaxed {
    let (adopted, pinned) = relaxable(c, req, tree);
    let mut out = Relaxed {
        found: Vec::new(),
        tried: Vec::new(),
    };
    let singles = adopted
        .iter()
        .map(|n| Change {
            allow: [n.clone()].into(),
            ..Change::default()
        })
        .chain(pinned.iter().map(|n| Change {
            drop: [n.clone()].into(),
            ..Change::default()
        }));
    for ch in singles {
        match attempt(set, py, &ch.apply(req)) {
            Ok(chosen) => out.found.push(way(set, py, req, c.world, &ch, &chosen)),
            Err(_) => out.tried.push(ch.label(req)),
        }
    }
    if !out.found.is_empty() || adopted.len() + pinned.len() == 0 {
        return out;
    }
    // Nothing alone: everything involved at once, then what each new conflict adds.
    let mut ch = Change {
        allow: adopted,
        drop: pinned,
    };
    loop {
        match attempt(set, py, &ch.apply(req)) {
            Ok(_) => {
                let (ch, chosen) = smallest(set, py, req, ch);
                out.found.push(way(set, py, req, c.world, &ch, &chosen));
                return out;
            }
            Err((more_adopted, more_pinned)) => {
                let before = ch.len();
                ch.allow.extend(more_adopted);
                ch.drop.extend(more_pinned);
                if ch.len() == before {
                    let label = ch.label(req);
                    if !out.tried.contains(&label) {
                        out.tried.push(label);
                    }
                    return out;
                }
            }
        }
    }
}

/// `ch` (which has a solution) without the changes it does not need, and its solution.
fn smallest(set: &RecipeSet, py: &PythonFacts, req: &Request, mut ch: Change) -> (Change, BTreeMap<String, String>) {
    let names: Vec<(bool, String)> = (ch.allow.iter().map(|n| (true, n.clone())))
        .chain(ch.drop.iter().map(|n| (false, n.clone())))
        .collect();
    for (allow, name) in names {
        let mut fewer = ch.clone();
        if allow {
            fewer.allow.remove(&name);
        } else {
            fewer.drop.remove(&name);
        }
        if fewer.len() > 0 && attempt(set, py, &fewer.apply(req)).is_ok() {
            ch = fewer;
        }
    }
    let chosen = attempt(set, py, &ch.apply(req)).unwrap_or_default();
    (ch, chosen)
}

/// Whether component `name` is installed (under any of its names).
fn installed(set: &RecipeSet, py: &PythonFacts, name: &str) -> bool {
    set.get(name)
        .is_some_and(|r| crate::resolve::owners::provider(r, py).is_some())
}

/// The way out that `ch` is, with what kiln then chooses.
fn way(
    set: &RecipeSet,
    py: &PythonFacts,
    req: &Request,
    world: &World<'_>,
    ch: &Change,
    chosen: &BTreeMap<String, String>,
) -> WayOut {
    let mut actions = Vec::new();
    if !ch.allow.is_empty() {
        let what: Vec<String> = ch
            .allow
            .iter()
            .map(|n| match world.adopted.get(n) {
                Some(v) => format!("{n} {v}"),
                None => n.clone(),
            })
            .collect();
        actions.push(format!("allow replacing {}", what.join(" and ")));
    }
    let dropped: Vec<&String> = ch.drop.iter().filter_map(|n| req.pins.get(n).map(|(t, _)| t)).collect();
    match dropped.as_slice() {
        [] => {}
        [one] => actions.push(format!("drop the pin `{one}`")),
        many => {
            let texts: Vec<String> = many.iter().map(|t| format!("`{t}`")).collect();
            actions.push(format!("drop the pins {} together", texts.join(" and ")));
        }
    }
    let then: Vec<String> = ch
        .allow
        .iter()
        .chain(&ch.drop)
        .filter_map(|n| chosen.get(n).map(|v| format!("{n} {v}")))
        .collect();
    let mut says = format!("{}: kiln then chooses {}", actions.join(" and "), then.join(", "));
    // Installed components built against one that moves are built again.
    let rebuilt: Vec<&str> = set
        .recipes
        .values()
        .filter(|r| !ch.allow.contains(&r.name) && chosen.contains_key(&r.name))
        .filter(|r| r.depends_all().any(|d| d.abi && ch.allow.contains(&d.name)))
        .filter(|r| installed(set, py, &r.name))
        .map(|r| r.name.as_str())
        .collect();
    if !rebuilt.is_empty() {
        says = format!("{says}; installed and rebuilt against it: {}", rebuilt.join(", "));
    }
    let drop_pins = ch
        .drop
        .iter()
        .filter_map(|n| {
            let (pin, _) = req.pins.get(n)?;
            let features = req.targets.iter().find(|(t, _)| t == n).map(|(_, f)| f.as_slice());
            let becomes = match features {
                Some(f) if !f.is_empty() => format!("{n}[{}]", f.join(",")),
                _ => n.clone(),
            };
            Some(DroppedPin {
                pin: pin.clone(),
                becomes,
            })
        })
        .collect();
    WayOut {
        says,
        allow_replace: ch.allow.iter().cloned().collect(),
        drop_pins,
        command: None,
    }
}
