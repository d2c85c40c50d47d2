//! The version solver: which version of each component, so that every constraint holds at once
//! and there is one version of each (never two torches). PubGrub (the `pubgrub` crate, the
//! algorithm uv's resolver grew from) does the search; this module turns kiln's world into its
//! terms and its failures into a short chain a person can follow, plus the ways out kiln knows.
//!
//! Constraints come from every side: each recipe version's dependencies (PEP 440 specifiers),
//! the `Requires-Dist` of the distributions already installed (kept unless the user names them
//! or allows replacing them), and the user (target pins such as `torch==2.14.1`). An installed
//! component the user did not name keeps its version: it is "adopted" and the solver may only
//! choose that version, unless `--allow-replace NAME`. Local version labels (`+cu130`) are
//! ignored for matching, as PEP 440 does for specifiers without one. The environment markers
//! of a `Requires-Dist` line are evaluated for the target interpreter (the probe reports them);
//! lines under an `extra ==` marker are ignored, since which extras were installed is not
//! recorded (extras of kiln components are its own features).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use pep440_rs::{Operator, Version, VersionSpecifier, VersionSpecifiers};
use pubgrub::{
    Dependencies, DependencyConstraints, DependencyProvider, DerivationTree, External, PackageResolutionStatistics,
    PubGrubError, Ranges,
};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::probe::normalize;
use crate::probe::python::PythonFacts;
use crate::recipe::model::Dependency;
use crate::recipe::{Kind, RecipeSet};

const ROOT: &str = "<your request>";

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Components named on the command line, with features.
    pub targets: Vec<(String, Vec<String>)>,
    /// Version pins from the command line (`torch==2.14.1`), by component.
    pub pins: BTreeMap<String, (String, VersionSpecifiers)>,
    /// Installed components the user allows kiln to replace.
    pub allow_replace: BTreeSet<String>,
}

/// Where a candidate version comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Installed,
    Recipe,
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
    pub because: Vec<String>,
    pub ways_out: Vec<String>,
}

type Vs = Ranges<Version>;

/// A set of candidate versions of one package, as bits: bit `i` is the package's `i`-th
/// candidate in order of preference. Every set operation is one machine instruction, which is
/// what keeps 10,000-component resolutions fast; the PEP 440 ranges are applied once, when the
/// world is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cands(u64);

impl std::fmt::Display for Cands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#b}", self.0)
    }
}

impl pubgrub::VersionSet for Cands {
    type V = u32;
    fn empty() -> Self {
        Cands(0)
    }
    fn singleton(v: u32) -> Self {
        Cands(1u64.checked_shl(v).unwrap_or(0))
    }
    fn complement(&self) -> Self {
        Cands(!self.0)
    }
    fn intersection(&self, other: &Self) -> Self {
        Cands(self.0 & other.0)
    }
    fn contains(&self, v: &u32) -> bool {
        v < &64 && self.0 & (1 << v) != 0
    }
    fn full() -> Self {
        Cands(u64::MAX)
    }
    fn union(&self, other: &Self) -> Self {
        Cands(self.0 | other.0)
    }
    fn is_disjoint(&self, other: &Self) -> bool {
        self.0 & other.0 == 0
    }
    fn subset_of(&self, other: &Self) -> bool {
        self.0 & !other.0 == 0
    }
}

/// The most candidates one package may have (bits in [`Cands`]).
const MAX_CANDIDATES: usize = 64;

/// PEP 440 specifiers as a PubGrub range (locals ignored).
pub fn ranges(spec: &VersionSpecifiers) -> Vs {
    spec.iter().fold(Ranges::full(), |acc, s| acc.intersection(&one(s)))
}

fn bump(release: &[u64], at: usize) -> Version {
    let mut r: Vec<u64> = release[..=at.min(release.len().saturating_sub(1))].to_vec();
    if let Some(last) = r.last_mut() {
        *last += 1;
    }
    Version::new(r)
}

fn one(s: &VersionSpecifier) -> Vs {
    let v = s.version().clone().without_local();
    let rel = v.release().to_vec();
    match s.operator() {
        Operator::Equal | Operator::ExactEqual => Ranges::singleton(v),
        Operator::NotEqual => Ranges::singleton(v).complement(),
        Operator::GreaterThan => Ranges::strictly_higher_than(v),
        Operator::GreaterThanEqual => Ranges::higher_than(v),
        Operator::LessThan => Ranges::strictly_lower_than(v),
        Operator::LessThanEqual => Ranges::lower_than(v),
        Operator::TildeEqual => Ranges::between(v, bump(&rel, rel.len().saturating_sub(2))),
        Operator::EqualStar => Ranges::between(Version::new(rel.clone()), bump(&rel, rel.len().saturating_sub(1))),
        Operator::NotEqualStar => {
            Ranges::between(Version::new(rel.clone()), bump(&rel, rel.len().saturating_sub(1))).complement()
        }
    }
}

/// A package inside the solver: an index into [`World::names`]. Interning the names keeps
/// strings out of the search (PubGrub hashes and clones packages constantly).
type Id = u32;

/// The request itself, as PubGrub's root package.
const ROOT_ID: Id = 0;

/// A dependency edge of one candidate: the component, and the specifier as written (an index
/// into [`World::specs`]).
#[derive(Debug, Clone, Copy)]
struct Edge {
    dep: Id,
    spec: u32,
}

/// kiln's world in PubGrub's terms. Packages are numbered in name order (the root first; a
/// package only an installed distribution's metadata names comes last), so that dependency
/// lists sorted by number are sorted by name and explanations do not depend on the order
/// recipes were read in.
struct World<'a> {
    names: Vec<&'a str>,
    ids: FxHashMap<&'a str, Id>,
    /// Candidate versions per package, in order of preference, with their origin.
    candidates: Vec<Vec<(Version, Origin)>>,
    /// The distinct dependency lists: the versions of one recipe usually share theirs.
    lists: Vec<Vec<Edge>>,
    /// Per package and candidate index: its dependency list (an index into `lists`).
    list_of: Vec<Vec<u32>>,
    /// Each distinct specifier text once, with its PEP 440 range.
    specs: Vec<(String, Vs)>,
    /// Why the root depends on a package: "you asked for", "installed", ...
    root_reasons: BTreeMap<String, String>,
    /// Installed components that must keep their version.
    adopted: BTreeMap<String, Version>,
    /// Position in dependency order (dependencies first), per package. Deciding dependents
    /// before their dependencies means every cap on a component is known before its version is
    /// chosen, which spares most backtracking.
    order: Vec<usize>,
}

impl World<'_> {
    fn id(&self, name: &str) -> Option<Id> {
        self.ids.get(name).copied()
    }

    fn candidates_of(&self, name: &str) -> &[(Version, Origin)] {
        self.id(name).map_or(&[], |i| &self.candidates[i as usize])
    }

    /// The specifier text of `p`'s candidate `i` on `d`.
    fn spec_text(&self, p: Id, i: u32, d: Id) -> &str {
        self.list_of[p as usize]
            .get(i as usize)
            .into_iter()
            .flat_map(|l| &self.lists[*l as usize])
            .find(|e| e.dep == d)
            .map_or("", |e| self.specs[e.spec as usize].0.as_str())
    }
}

/// The bits of a package's candidates that exist.
fn available(n: usize) -> u64 {
    if n >= MAX_CANDIDATES { u64::MAX } else { (1u64 << n) - 1 }
}

/// The world compiled for PubGrub: versions are candidate indexes, version sets are bitmasks,
/// each dependency list merged per package and sorted (parallel to [`World::lists`]).
struct Compiled<'w> {
    world: &'w World<'w>,
    deps: Vec<Vec<(Id, Cands)>>,
}

impl<'w> Compiled<'w> {
    fn new(world: &'w World<'w>) -> Compiled<'w> {
        // Many edges share a specifier (`>=2.11`, `==2.14.1`): each (package, text) once.
        let mut masks: FxHashMap<(Id, u32), Cands> = FxHashMap::default();
        let mut mask = |e: &Edge| {
            *masks.entry((e.dep, e.spec)).or_insert_with(|| {
                let vs = &world.specs[e.spec as usize].1;
                let mut bits = 0u64;
                for (i, (v, _)) in world.candidates[e.dep as usize].iter().enumerate().take(MAX_CANDIDATES) {
                    if vs.contains(v) {
                        bits |= 1 << i;
                    }
                }
                Cands(bits)
            })
        };
        let deps = world
            .lists
            .iter()
            .map(|edges| {
                let mut list: Vec<(Id, Cands)> = edges.iter().map(|e| (e.dep, mask(e))).collect();
                list.sort_by_key(|(d, _)| *d);
                list.dedup_by(|later, kept| {
                    let same = later.0 == kept.0;
                    if same {
                        kept.1.0 &= later.1.0;
                    }
                    same
                });
                list
            })
            .collect();
        Compiled { world, deps }
    }

    fn version(&self, p: Id, i: u32) -> Option<&Version> {
        self.world.candidates[p as usize].get(i as usize).map(|(v, _)| v)
    }

    fn name(&self, p: Id) -> &str {
        self.world.names[p as usize]
    }

    /// The candidate versions in a set, as text.
    fn versions_text(&self, p: Id, set: &Cands) -> String {
        let vs: Vec<String> = (0..MAX_CANDIDATES as u32)
            .filter(|i| set.0 & (1 << i) != 0)
            .filter_map(|i| self.version(p, i).map(|v| v.to_string()))
            .collect();
        vs.join(" or ")
    }
}

impl DependencyProvider for Compiled<'_> {
    type P = Id;
    type V = u32;
    type VS = Cands;
    /// Packages that caused more conflicts first, then dependents before their dependencies,
    /// then those with fewer candidate versions.
    type Priority = (u32, usize, Reverse<u32>);
    type M = String;
    type Err = std::convert::Infallible;

    fn prioritize(&self, package: &Id, range: &Cands, stats: &PackageResolutionStatistics) -> Self::Priority {
        let avail = available(self.world.candidates[*package as usize].len());
        (
            stats.conflict_count(),
            self.world.order[*package as usize],
            Reverse((range.0 & avail).count_ones()),
        )
    }

    fn choose_version(&self, package: &Id, range: &Cands) -> Result<Option<u32>, Self::Err> {
        let n = self.world.candidates[*package as usize].len().min(MAX_CANDIDATES) as u32;
        Ok((0..n).find(|i| range.0 & (1 << i) != 0))
    }

    fn get_dependencies(&self, package: &Id, version: &u32) -> Result<Dependencies<Id, Cands, String>, Self::Err> {
        let list = self.world.list_of[*package as usize]
            .get(*version as usize)
            .map_or(&[][..], |l| self.deps[*l as usize].as_slice());
        Ok(Dependencies::Available(
            list.iter().copied().collect::<DependencyConstraints<Id, Cands>>(),
        ))
    }
}

/// Each distinct specifier text once, with its range.
#[derive(Default)]
struct Specs {
    list: Vec<(String, Vs)>,
    index: FxHashMap<String, u32>,
}

impl Specs {
    fn intern(&mut self, text: &str, range: impl FnOnce() -> Vs) -> u32 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push((text.to_string(), range()));
        self.index.insert(text.to_string(), i);
        i
    }
}

/// Everything the solver is told, for the explanation renderer and the tests.
fn build_world<'a>(set: &'a RecipeSet, py: &'a PythonFacts, req: &'a Request) -> World<'a> {
    let mut root_reasons = BTreeMap::new();
    let mut adopted = BTreeMap::new();
    let mut specs = Specs::default();
    let markers = py.python.marker_environment();
    // Components by distribution name, and those installed.
    let mut by_dist: FxHashMap<String, &str> = FxHashMap::default();
    let mut installed: FxHashMap<&str, &crate::probe::python::Dist> = FxHashMap::default();
    for r in set.recipes.values() {
        if let Some(d) = r.dist.as_deref() {
            let d = normalize(d);
            if let Some(dist) = py.dists.get(&d) {
                installed.insert(r.name.as_str(), dist);
            }
            by_dist.insert(d, r.name.as_str());
        }
    }
    let named: FxHashSet<&str> = req
        .targets
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(req.pins.keys().map(String::as_str))
        .collect();
    // Only what the request can reach matters: the targets, the pins, what is installed, and
    // everything any of their versions depends on, in dependency order.
    let mut roots: Vec<(String, Vec<String>)> = req.targets.clone();
    roots.extend(req.pins.keys().map(|n| (n.clone(), Vec::new())));
    let mut installed_names: Vec<&str> = installed.keys().copied().collect();
    installed_names.sort_unstable();
    roots.extend(installed_names.iter().map(|n| (n.to_string(), Vec::new())));
    let reachable = set.closure_of(&roots);
    // Number the packages in name order, the root first.
    let mut names: Vec<&str> = reachable.iter().map(|(r, _)| r.name.as_str()).collect();
    names.sort_unstable();
    names.insert(0, ROOT);
    let mut ids: FxHashMap<&str, Id> = names.iter().enumerate().map(|(i, n)| (*n, i as Id)).collect();
    let known = names.len();
    let mut id = |name: &'a str| -> Id {
        match ids.get(name) {
            Some(i) => *i,
            None => {
                // Named only by an installed distribution's metadata or a pin.
                let i = names.len() as Id;
                names.push(name);
                ids.insert(name, i);
                i
            }
        }
    };
    let mut candidates: Vec<Vec<(Version, Origin)>> = vec![vec![(Version::new([0]), Origin::Recipe)]];
    candidates.resize_with(known, Vec::new);
    let mut list_of: Vec<Vec<u32>> = vec![vec![0]];
    list_of.resize_with(known, Vec::new);
    let mut lists: Vec<Vec<Edge>> = vec![Vec::new()];
    let mut order = vec![0; known];
    order[0] = usize::MAX;
    let mut root: Vec<Edge> = Vec::new();
    let mut python: FxHashMap<&str, bool> = FxHashMap::default();
    for (position, (r, _)) in reachable.iter().enumerate() {
        order[id(&r.name) as usize] = position;
        python.insert(r.name.as_str(), r.kind == Kind::Python);
    }
    // Every dependency of a reachable recipe is reachable: look kinds up there, not in the set.
    let is_python = |name: &str| match python.get(name) {
        Some(p) => *p,
        None => set.get(name).is_some_and(|r| r.kind == Kind::Python),
    };
    for (r, features) in reachable.iter().filter(|(r, _)| r.kind == Kind::Python) {
        let features: Vec<String> = features.iter().map(|f| f.to_string()).collect();
        let name = r.name.as_str();
        let me = id(name) as usize;
        let replaceable = named.contains(name) || req.allow_replace.contains(name);
        let installed = installed
            .get(name)
            .and_then(|d| Version::from_str(&d.version).ok().map(|v| (v.without_local(), *d)));
        if let Some((v, dist)) = &installed {
            // An installed version the recipe no longer accepts is a candidate only when kiln
            // may not replace it.
            if !replaceable || r.accepts_version(v) {
                // The installed distribution's own metadata binds what it was built for.
                let mut deps = Vec::new();
                for line in &dist.requires {
                    let Ok(rq) = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(line) else {
                        continue;
                    };
                    // A requirement for another platform, Python or extra does not bind.
                    if !rq.marker.evaluate_optional_environment(markers.as_ref(), &[]) {
                        continue;
                    }
                    let Some(comp) = by_dist.get(&normalize(rq.name.as_ref())) else {
                        continue;
                    };
                    let spec = match &rq.version_or_url {
                        Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => s.clone(),
                        _ => VersionSpecifiers::from_iter(std::iter::empty()),
                    };
                    deps.push(Edge {
                        dep: id(comp),
                        spec: specs.intern(&spec.to_string(), || ranges(&spec)),
                    });
                }
                candidates[me].push((v.clone(), Origin::Installed));
                list_of[me].push(lists.len() as u32);
                lists.push(deps);
            }
            let spec = if replaceable {
                // Installed and replaceable: some version of it must still fit everything else.
                root_reasons.insert(r.name.clone(), format!("{name} {v} is installed"));
                specs.intern("", Ranges::full)
            } else {
                adopted.insert(r.name.clone(), v.clone());
                root_reasons.insert(r.name.clone(), format!("{name} {v} is installed and adopted"));
                specs.intern(&format!("=={v}"), || Ranges::singleton(v.clone()))
            };
            root.push(Edge { dep: me as Id, spec });
        }
        if adopted.contains_key(name) {
            continue;
        }
        let mut edge = |d: &'a Dependency| Edge {
            dep: id(&d.name),
            spec: specs.intern(d.version.as_deref().unwrap_or_default(), || {
                d.spec.as_ref().map_or_else(Ranges::full, ranges)
            }),
        };
        // The component's own dependencies: one list, shared by every version without pins of
        // its own.
        let own: Vec<&'a Dependency> = r.depends_with(&features).filter(|d| is_python(&d.name)).collect();
        let shared: Vec<Edge> = own.iter().map(|d| edge(d)).collect();
        let mut shared_list = None;
        for e in &r.versions {
            let v = e.version.clone().without_local();
            let list = if e.depends.is_empty() {
                *shared_list.get_or_insert_with(|| {
                    lists.push(shared.clone());
                    lists.len() as u32 - 1
                })
            } else {
                let mut deps: Vec<Edge> = own
                    .iter()
                    .zip(&shared)
                    .filter(|(d, _)| !e.depends.iter().any(|o| o.name == d.name))
                    .map(|(_, x)| *x)
                    .collect();
                deps.extend(e.depends.iter().filter(|d| is_python(&d.name)).map(&mut edge));
                lists.push(deps);
                lists.len() as u32 - 1
            };
            // An installed version that the recipe also describes uses the recipe's pins
            // merged with its metadata (both must hold to keep or rebuild it).
            match candidates[me].iter().position(|(x, _)| *x == v) {
                Some(i) => {
                    let mut merged = lists[list_of[me][i] as usize].clone();
                    merged.extend(lists[list as usize].iter().copied());
                    list_of[me][i] = lists.len() as u32;
                    lists.push(merged);
                }
                None => {
                    candidates[me].push((v, Origin::Recipe));
                    list_of[me].push(list);
                }
            }
        }
    }
    // Targets need no reason of their own: "you asked for NAME" is the default.
    for (name, _) in &req.targets {
        if is_python(name) {
            root.push(Edge {
                dep: id(name),
                spec: specs.intern("", Ranges::full),
            });
        }
    }
    for (name, (text, spec)) in &req.pins {
        root.push(Edge {
            dep: id(name),
            spec: specs.intern(&spec.to_string(), || ranges(spec)),
        });
        root_reasons.insert(name.clone(), format!("you asked for {text}"));
    }
    lists[0] = root;
    candidates.resize_with(names.len(), Vec::new);
    list_of.resize_with(names.len(), Vec::new);
    order.resize(names.len(), 0);
    World {
        ids,
        names,
        candidates,
        lists,
        list_of,
        specs: specs.list,
        root_reasons,
        adopted,
        order,
    }
}

/// Solves `req`. On success, also says for each component not at its newest version why not.
pub fn solve(set: &RecipeSet, py: &PythonFacts, req: &Request) -> Result<Solution, Conflict> {
    let world = build_world(set, py, req);
    let compiled = Compiled::new(&world);
    match pubgrub::resolve(&compiled, ROOT_ID, 0u32) {
        Ok(sel) => {
            let chosen: BTreeMap<String, String> = sel
                .into_iter()
                .filter(|(p, _)| *p != ROOT_ID)
                .filter_map(|(p, i)| {
                    compiled
                        .version(p, i)
                        .map(|v| (compiled.name(p).to_string(), v.to_string()))
                })
                .collect();
            Ok(Solution {
                chosen,
                not_newest: BTreeMap::new(),
            })
        }
        Err(PubGrubError::NoSolution(tree)) => {
            let because = explain(&compiled, &tree);
            Err(Conflict {
                ways_out: ways_out(set, py, req, &compiled, &tree),
                because,
            })
        }
        Err(e) => Err(Conflict {
            because: vec![format!("the solver failed: {e}")],
            ways_out: Vec::new(),
        }),
    }
}

/// For each of `names` whose chosen version is not its recipe's newest (and not adopted), says
/// why: the chain of reasons that forbids the newest one, found by solving again with it pinned.
pub fn explain_not_newest(set: &RecipeSet, py: &PythonFacts, req: &Request, solution: &mut Solution, names: &[String]) {
    let world = build_world(set, py, req);
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
        if let Err(c) = solve_plain(set, py, &forced) {
            let own = format!("you asked for {name}==");
            let because: Vec<String> = c.into_iter().filter(|l| !l.starts_with(&own)).collect();
            solution
                .not_newest
                .insert(name.clone(), format!("{v}, not {newest_v}: {}", because.join("; ")));
        }
    }
}

fn solve_plain(set: &RecipeSet, py: &PythonFacts, req: &Request) -> Result<(), Vec<String>> {
    let world = build_world(set, py, req);
    let compiled = Compiled::new(&world);
    match pubgrub::resolve(&compiled, ROOT_ID, 0u32) {
        Ok(_) => Ok(()),
        Err(PubGrubError::NoSolution(tree)) => Err(explain(&compiled, &tree)),
        Err(e) => Err(vec![e.to_string()]),
    }
}

type Tree = DerivationTree<Id, Cands, String>;

/// Why no candidate of `p` is acceptable: it is adopted, or none of the known versions fits.
fn why_none(world: &World<'_>, p: &str, wanted: &str) -> String {
    match world.adopted.get(p) {
        Some(v) => format!("{p} {v} is installed and adopted; kiln does not replace it (--allow-replace {p})"),
        None => {
            let offered: Vec<String> = world.candidates_of(p).iter().map(|(v, _)| v.to_string()).collect();
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
fn explain(c: &Compiled, tree: &Tree) -> Vec<String> {
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
                let none_fits = dr.0 & available(world.candidates[d as usize].len()) == 0;
                let versions = c.versions_text(p, &pv);
                // The specifier as written, from the first version of `p` in the set.
                let first = (0..MAX_CANDIDATES as u32).find(|i| pv.0 & (1 << i) != 0);
                let (text, installed) = match first {
                    Some(i) => (
                        world.spec_text(p, i, d),
                        world.candidates[p as usize]
                            .get(i as usize)
                            .is_some_and(|(_, o)| *o == Origin::Installed),
                    ),
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
fn ways_out(set: &RecipeSet, py: &PythonFacts, req: &Request, c: &Compiled, tree: &Tree) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> Vs {
        ranges(&VersionSpecifiers::from_str(s).unwrap())
    }

    fn v(s: &str) -> Version {
        Version::from_str(s).unwrap()
    }

    fn world(files: &[(&str, &str)]) -> RecipeSet {
        let files = files
            .iter()
            .map(|(n, t)| (format!("{n}.toml"), t.to_string()))
            .collect();
        RecipeSet::from_texts(files, "test").expect("valid recipes")
    }

    fn chosen(set: &RecipeSet, targets: &[(&str, &[&str])]) -> BTreeMap<String, String> {
        let req = Request {
            targets: targets
                .iter()
                .map(|(n, f)| (n.to_string(), f.iter().map(|x| x.to_string()).collect()))
                .collect(),
            ..Request::default()
        };
        solve(set, &PythonFacts::nothing_installed("python3", "3.12.0"), &req)
            .expect("a solution")
            .chosen
    }

    #[test]
    fn a_features_dependencies_constrain_the_solution_only_when_it_is_asked_for() {
        let set = world(&[
            (
                "app",
                "[package]\nname = \"app\"\nversion = \"1.0\"\n[source]\nwheel = \"app==1.0\"\n\
                 [features.fast]\ndepends = { lib = \"<2\" }\n",
            ),
            (
                "lib",
                "[package]\nname = \"lib\"\n[[versions]]\nversion = \"2.0\"\nwheel = \"lib==2.0\"\n\
                 [[versions]]\nversion = \"1.5\"\nwheel = \"lib==1.5\"\n",
            ),
        ]);
        let with = chosen(&set, &[("app", &["fast"]), ("lib", &[])]);
        assert_eq!(with.get("lib").map(String::as_str), Some("1.5"), "{with:?}");
        let without = chosen(&set, &[("app", &[]), ("lib", &[])]);
        assert_eq!(without.get("lib").map(String::as_str), Some("2.0"), "{without:?}");
    }

    #[test]
    fn pep440_specifiers_as_ranges() {
        assert!(spec("==2.14.1").contains(&v("2.14.1")));
        assert!(!spec("==2.14.1").contains(&v("2.14.0")));
        assert!(spec(">=2.7").contains(&v("2.11.0")));
        assert!(spec(">=0.1.11,<0.2").contains(&v("0.1.15.post2")));
        assert!(!spec(">=0.1.11,<0.2").contains(&v("0.2")));
        assert!(spec("~=2.14").contains(&v("2.99")));
        assert!(!spec("~=2.14").contains(&v("3.0")));
        assert!(spec("==2.14.*").contains(&v("2.14.9")));
        assert!(!spec("==2.14.*").contains(&v("2.15.0")));
        assert!(!spec("!=0.1.8").contains(&v("0.1.8")));
        assert!(spec(">=0.6.18rc1").contains(&v("0.6.18")));
        assert!(!spec(">=0.6.18").contains(&v("0.6.18rc1")));
    }
}
