//! The version solver: which version of each component, so that every constraint holds at once
//! and there is one version of each (never two torches). PubGrub (the `pubgrub` crate, the
//! algorithm uv's resolver grew from) does the search; kiln turns its world into PubGrub's terms
//! and PubGrub's failures into a short chain a person can follow, plus the ways out kiln knows.
//!
//! This module owns the entry points ([`solve`], [`solves`], [`explain_not_newest`]) and what
//! they take and return. Besides the user's pins a request may carry preferences
//! ([`Request::prefer`]): versions some evidence favours, not the user (the `Requires-Dist` pins
//! of a prebuilt wheel that would then qualify). To the solver a preference is a pin whose
//! reason is its own (`why`); that it is only preferred is the caller's part: the session solves
//! once without them, once with them where [`solves`] says that has a solution, and keeps the
//! second plan only where the wheel then qualifies (`session::plan`). A component held below its
//! newest version by a preference says so in `not_newest`, like any other reason. The work is split by job: `world` numbers the packages and applies PEP 440 once
//! (`world/build.rs` gathers the constraints), `provider` searches over bitsets of candidates,
//! and `explain` turns a failure into reasons and ways out. Deliberately ignored here: how a
//! version is built, where it comes from and whether it runs (`status` and `plan` decide those
//! from what is chosen).

mod explain;
mod provider;
mod ways;
mod world;

use std::collections::{BTreeMap, BTreeSet};

use pep440_rs::{VersionSpecifier, VersionSpecifiers};
use pubgrub::PubGrubError;
use serde::Serialize;

use crate::probe::python::PythonFacts;
use crate::recipe::RecipeSet;

use provider::Compiled;
use world::World;

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Components named on the command line, with features.
    pub targets: Vec<(String, Vec<String>)>,
    /// Version pins from the command line (`torch==2.14.1`), by component.
    pub pins: BTreeMap<String, (String, VersionSpecifiers)>,
    /// Installed components the user allows kiln to replace.
    pub allow_replace: BTreeSet<String>,
    /// Versions preferred for a reason other than the user's (a prebuilt wheel's pins), by
    /// component; held like pins in the solve that carries them.
    pub prefer: BTreeMap<String, Preference>,
}

/// A version range preferred for one component, and why.
#[derive(Debug, Clone)]
pub struct Preference {
    /// As written: `torch==2.14.0`.
    pub text: String,
    pub spec: VersionSpecifiers,
    /// Why it is preferred, as a reason in a chain ("the prebuilt wheel ... pins torch==2.14.0").
    pub why: String,
}

/// A solution: the chosen version of each component, and why a component is not at its newest.
#[derive(Debug, Clone, Serialize)]
pub struct Solution {
    pub chosen: BTreeMap<String, String>,
    /// For components whose chosen version is not the recipe's first (newest) one: why not.
    pub not_newest: BTreeMap<String, String>,
}

/// No solution: the reasons as short lines, and what the user can do.
#[derive(Debug, Clone, Serialize)]
pub struct Conflict {
    /// The constraints that collide, one line per constraint and version, in the order PubGrub
    /// met them.
    pub because: Vec<String>,
    /// Facts that help read the reasons without being constraints themselves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Changes to the request that a second solve proved to work.
    pub ways_out: Vec<WayOut>,
    /// Changes kiln solved again with that found no solution either, as flags and pins
    /// (`--allow-replace torch`, "without the pin `sglang==0.5.23`"). With `ways_out` empty and
    /// this empty too, nothing the user may relax takes part in the conflict.
    pub tried: Vec<String>,
}

/// A change to the request that a second solve proved to have a solution.
#[derive(Debug, Clone, Serialize)]
pub struct WayOut {
    /// What changes and what kiln then chooses, in words.
    pub says: String,
    /// Installed components the user would let kiln replace (`--allow-replace NAME`).
    pub allow_replace: Vec<String>,
    /// Version pins the user would drop.
    pub drop_pins: Vec<DroppedPin>,
    /// The user's own command with this change made (every other flag kept); filled by
    /// [`Conflict::for_command`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// A target with a version pin, as the user wrote it, and the target it becomes without it.
#[derive(Debug, Clone, Serialize)]
pub struct DroppedPin {
    pub pin: String,
    pub becomes: String,
}

impl Conflict {
    /// A conflict that is no version conflict at all (the solver or a probe failed): one
    /// reason, nothing to try.
    pub fn failed(why: String) -> Conflict {
        Conflict {
            because: vec![why],
            notes: Vec::new(),
            ways_out: Vec::new(),
            tried: Vec::new(),
        }
    }

    /// Each way out with the command that takes it: `program` and the user's `args` as given
    /// (every flag kept), with the way out's pins dropped and `--allow-replace` flags added.
    pub fn for_command(mut self, program: &str, args: &[String]) -> Conflict {
        for w in &mut self.ways_out {
            w.command = Some(w.command_from(program, args));
        }
        self
    }
}

impl WayOut {
    /// `program` `args` changed by this way out, quoted for a POSIX shell.
    pub fn command_from(&self, program: &str, args: &[String]) -> String {
        let mut out: Vec<String> = args
            .iter()
            .map(|a| {
                self.drop_pins
                    .iter()
                    .find(|d| d.pin == a.trim())
                    .map_or_else(|| a.clone(), |d| d.becomes.clone())
            })
            .collect();
        // Flags go before a `--` that ends them, else last.
        let at = out.iter().position(|a| a == "--").unwrap_or(out.len());
        let given = |name: &str| {
            args.windows(2).any(|w| w[0] == "--allow-replace" && w[1] == name)
                || args.iter().any(|a| a.strip_prefix("--allow-replace=") == Some(name))
        };
        let extra: Vec<String> = self
            .allow_replace
            .iter()
            .filter(|n| !given(n))
            .flat_map(|n| ["--allow-replace".to_string(), n.clone()])
            .collect();
        out.splice(at..at, extra);
        crate::process::Cmd::new(program).args(out).to_string()
    }
}

/// Solves `req`: the chosen version of each component, or why there is none and what to do.
/// (`not_newest` is left empty; [`explain_not_newest`] fills it for the components that matter.)
pub fn solve(set: &RecipeSet, py: &PythonFacts, req: &Request) -> Result<Solution, Conflict> {
    let world = World::build(set, py, req);
    let compiled = Compiled::new(&world);
    match compiled.solve() {
        Ok(chosen) => Ok(Solution {
            chosen: compiled.chosen_text(&chosen),
            not_newest: BTreeMap::new(),
        }),
        Err(PubGrubError::NoSolution(tree)) => {
            let relaxed = ways::ways_out(set, py, req, &compiled, &tree);
            Err(Conflict {
                because: explain::because(&compiled, &tree),
                notes: explain::notes(set, &compiled, &tree),
                ways_out: relaxed.found,
                tried: relaxed.tried,
            })
        }
        Err(e) => Err(Conflict::failed(format!("the solver failed: {e}"))),
    }
}

/// For each of `names` whose chosen version is not its recipe's newest (and not adopted), says
/// why: the chain of reasons that forbids the newest one, found by solving again with it pinned.
pub fn explain_not_newest(set: &RecipeSet, py: &PythonFacts, req: &Request, solution: &mut Solution, names: &[String]) {
    let world = World::build(set, py, req);
    for name in names {
        let Some(v) = solution.chosen.get(name) else { continue };
        let Some(newest) = set.get(name).and_then(|r| r.versions.first()) else {
            continue;
        };
        let newest_v = newest.version.clone().without_local();
        if newest_v.to_string() == *v || world.adopted.contains_key(name) {
            continue;
        }
        let mut forced = req.clone();
        forced.pins.insert(
            name.clone(),
            (
                format!("{name}=={newest_v}"),
                VersionSpecifiers::from_iter([VersionSpecifier::equals_version(newest_v.clone())]),
            ),
        );
        // The forced pin replaces a preference on it: what else forbids the newest?
        match solve_plain(set, py, &forced) {
            Err(c) => {
                let own = format!("you asked for {name}==");
                let mut because: Vec<String> = c.into_iter().filter(|l| !l.starts_with(&own)).collect();
                // Below the newest the constraints allow, a preference chose among the rest
                // (a prebuilt wheel's pin): that is said too.
                because.extend(req.prefer.get(name).map(|p| p.why.clone()));
                solution
                    .not_newest
                    .insert(name.clone(), format!("{v}, not {newest_v}: {}", because.join("; ")));
            }
            Ok(()) => {
                if let Some(p) = req.prefer.get(name) {
                    solution
                        .not_newest
                        .insert(name.clone(), format!("{v}, not {newest_v}: {}", p.why));
                }
            }
        }
    }
}

/// Whether `req` has a solution (no explanation or ways out are worked out when it has none).
pub fn solves(set: &RecipeSet, py: &PythonFacts, req: &Request) -> bool {
    solve_plain(set, py, req).is_ok()
}

/// Whether `req` has a solution; the reasons when it has none (no ways out: those solve again).
fn solve_plain(set: &RecipeSet, py: &PythonFacts, req: &Request) -> Result<(), Vec<String>> {
    let world = World::build(set, py, req);
    let compiled = Compiled::new(&world);
    match compiled.solve() {
        Ok(_) => Ok(()),
        Err(PubGrubError::NoSolution(tree)) => Err(explain::because(&compiled, &tree)),
        Err(e) => Err(vec![e.to_string()]),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "explain_tests.rs"]
mod explain_tests;
