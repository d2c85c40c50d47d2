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
//! ignored for matching, as PEP 440 does for specifiers without one. Markers and extras of
//! `Requires-Dist` are ignored (a deliberate simplification; extras of kiln components are its
//! own features).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use pep440_rs::{Operator, Version, VersionSpecifier, VersionSpecifiers};
use pubgrub::{
    Dependencies, DependencyConstraints, DependencyProvider, DerivationTree, External, PackageResolutionStatistics,
    PubGrubError, Ranges,
};
use serde::Serialize;

use crate::probe::normalize;
use crate::probe::python::PythonFacts;
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

/// A dependency edge: the component, the versions allowed, the specifier as written.
type Edge = (String, Vs, String);

/// kiln's world in PubGrub's terms.
struct World {
    /// Candidate versions per package, in order of preference, with their origin.
    candidates: BTreeMap<String, Vec<(Version, Origin)>>,
    /// Dependencies of each (package, version), with the specifier as written.
    deps: BTreeMap<(String, Version), Vec<Edge>>,
    /// Why the root depends on a package: "you asked for", "installed", ...
    root_reasons: BTreeMap<String, String>,
    /// Installed components that must keep their version.
    adopted: BTreeMap<String, Version>,
    /// Position in dependency order (dependencies first). Deciding dependents before their
    /// dependencies means every cap on a component is known before its version is chosen,
    /// which spares most backtracking.
    order: std::collections::HashMap<String, usize>,
}

/// The world compiled for PubGrub: versions are candidate indexes, version sets are bitmasks.
struct Compiled<'w> {
    world: &'w World,
    deps: std::collections::HashMap<(String, u32), Vec<(String, Cands)>>,
}

impl<'w> Compiled<'w> {
    fn new(world: &'w World) -> Compiled<'w> {
        let mask = |d: &str, vs: &Vs| {
            let mut bits = 0u64;
            for (i, (v, _)) in world
                .candidates
                .get(d)
                .into_iter()
                .flatten()
                .enumerate()
                .take(MAX_CANDIDATES)
            {
                if vs.contains(v) {
                    bits |= 1 << i;
                }
            }
            Cands(bits)
        };
        // Many edges share a specifier (`>=2.11`, `==2.14.1`): compute each (package, text) once.
        let mut masks: std::collections::HashMap<(&str, &str), Cands> = std::collections::HashMap::new();
        let mut deps = std::collections::HashMap::new();
        for ((p, v), list) in &world.deps {
            let index = if p == ROOT {
                Some(0)
            } else {
                world
                    .candidates
                    .get(p)
                    .and_then(|c| c.iter().position(|(x, _)| x == v))
                    .map(|i| i as u32)
            };
            let Some(index) = index else { continue };
            let compiled: Vec<(String, Cands)> = list
                .iter()
                .map(|(d, vs, t)| {
                    (
                        d.clone(),
                        *masks.entry((d.as_str(), t.as_str())).or_insert_with(|| mask(d, vs)),
                    )
                })
                .collect();
            deps.insert((p.clone(), index), compiled);
        }
        Compiled { world, deps }
    }

    fn version(&self, p: &str, i: u32) -> Option<&Version> {
        self.world
            .candidates
            .get(p)
            .and_then(|c| c.get(i as usize))
            .map(|(v, _)| v)
    }

    /// The candidate versions in a set, as text.
    fn versions_text(&self, p: &str, set: &Cands) -> String {
        let vs: Vec<String> = (0..MAX_CANDIDATES as u32)
            .filter(|i| set.0 & (1 << i) != 0)
            .filter_map(|i| self.version(p, i).map(|v| v.to_string()))
            .collect();
        vs.join(" or ")
    }
}

impl DependencyProvider for Compiled<'_> {
    type P = String;
    type V = u32;
    type VS = Cands;
    /// Packages that caused more conflicts first, then dependents before their dependencies,
    /// then those with fewer candidate versions.
    type Priority = (u32, usize, Reverse<u32>);
    type M = String;
    type Err = std::convert::Infallible;

    fn prioritize(&self, package: &String, range: &Cands, stats: &PackageResolutionStatistics) -> Self::Priority {
        let n = self
            .world
            .candidates
            .get(package)
            .map_or(0, |c| c.len().min(MAX_CANDIDATES));
        let avail = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let order = if package == ROOT {
            usize::MAX
        } else {
            self.world.order.get(package).copied().unwrap_or(0)
        };
        (stats.conflict_count(), order, Reverse((range.0 & avail).count_ones()))
    }

    fn choose_version(&self, package: &String, range: &Cands) -> Result<Option<u32>, Self::Err> {
        if package == ROOT {
            return Ok(Some(0));
        }
        let n = self
            .world
            .candidates
            .get(package)
            .map_or(0, |c| c.len().min(MAX_CANDIDATES)) as u32;
        Ok((0..n).find(|i| range.0 & (1 << i) != 0))
    }

    fn get_dependencies(
        &self,
        package: &String,
        version: &u32,
    ) -> Result<Dependencies<String, Cands, String>, Self::Err> {
        let mut merged: BTreeMap<String, Cands> = BTreeMap::new();
        for (d, m) in self.deps.get(&(package.clone(), *version)).into_iter().flatten() {
            let e = merged.entry(d.clone()).or_insert(Cands(u64::MAX));
            e.0 &= m.0;
        }
        Ok(Dependencies::Available(
            merged.into_iter().collect::<DependencyConstraints<String, Cands>>(),
        ))
    }
}

/// Everything the solver is told, for the explanation renderer and the tests.
fn build_world(set: &RecipeSet, py: &PythonFacts, req: &Request) -> World {
    let mut w = World {
        candidates: BTreeMap::new(),
        deps: BTreeMap::new(),
        root_reasons: BTreeMap::new(),
        adopted: BTreeMap::new(),
        order: std::collections::HashMap::new(),
    };
    let by_dist: BTreeMap<String, &str> = set
        .recipes
        .values()
        .filter_map(|r| r.dist.as_deref().map(|d| (normalize(d), r.name.as_str())))
        .collect();
    let named: BTreeSet<&str> = req
        .targets
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(req.pins.keys().map(String::as_str))
        .collect();
    // Only what the request can reach matters: the targets, the pins, what is installed, and
    // everything any of their versions depends on, in dependency order.
    let mut roots: Vec<(String, Vec<String>)> = named.iter().map(|n| (n.to_string(), Vec::new())).collect();
    for r in set.recipes.values() {
        if r.dist.as_deref().is_some_and(|d| py.dists.contains_key(&normalize(d))) {
            roots.push((r.name.clone(), Vec::new()));
        }
    }
    let reachable = set.closure(&roots);
    let mut range_cache: std::collections::HashMap<String, Vs> = std::collections::HashMap::new();
    w.order = reachable.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect();
    let mut root: Vec<(String, Vs, String)> = Vec::new();
    for r in reachable
        .iter()
        .filter_map(|(n, _)| set.get(n))
        .filter(|r| r.kind == Kind::Python)
    {
        let installed = r
            .dist
            .as_deref()
            .and_then(|d| py.dists.get(&normalize(d)))
            .and_then(|d| Version::from_str(&d.version).ok().map(|v| (v.without_local(), d)));
        let mut cands: Vec<(Version, Origin)> = Vec::new();
        let replaceable = named.contains(r.name.as_str()) || req.allow_replace.contains(&r.name);
        if let Some((v, dist)) = &installed {
            // An installed version the recipe no longer accepts is a candidate only when kiln
            // may not replace it.
            if !replaceable || r.accepts_version(v) {
                cands.push((v.clone(), Origin::Installed));
            }
            // The installed distribution's own metadata binds what it was built for.
            let mut deps = Vec::new();
            for line in &dist.requires {
                let Ok(rq) = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(line) else {
                    continue;
                };
                if rq.marker != pep508_rs::MarkerTree::TRUE {
                    continue;
                }
                let Some(comp) = by_dist.get(&normalize(rq.name.as_ref())) else {
                    continue;
                };
                let spec = match &rq.version_or_url {
                    Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => s.clone(),
                    _ => VersionSpecifiers::from_iter(std::iter::empty()),
                };
                deps.push((comp.to_string(), ranges(&spec), spec.to_string()));
            }
            w.deps.insert((r.name.clone(), v.clone()), deps);
            if !replaceable {
                w.adopted.insert(r.name.clone(), v.clone());
                root.push((r.name.clone(), Ranges::singleton(v.clone()), format!("=={v}")));
                w.root_reasons
                    .insert(r.name.clone(), format!("{} {v} is installed and adopted", r.name));
            } else {
                // Installed and replaceable: some version of it must still fit everything else.
                root.push((r.name.clone(), Ranges::full(), String::new()));
                w.root_reasons
                    .insert(r.name.clone(), format!("{} {v} is installed", r.name));
            }
        }
        if !w.adopted.contains_key(&r.name) {
            for e in &r.versions {
                let v = e.version.clone().without_local();
                let deps: Vec<(String, Vs, String)> = r
                    .depends_of(Some(&e.version), &[])
                    .into_iter()
                    .filter(|d| set.get(&d.name).is_some_and(|x| x.kind == Kind::Python))
                    .map(|d| {
                        let text = d.version.clone().unwrap_or_default();
                        let vs = range_cache
                            .entry(text.clone())
                            .or_insert_with(|| d.spec.as_ref().map_or_else(Ranges::full, ranges))
                            .clone();
                        (d.name.clone(), vs, text)
                    })
                    .collect();
                // An installed version that the recipe also describes uses the recipe's pins
                // merged with its metadata (both must hold to keep or rebuild it).
                let key = (r.name.clone(), v.clone());
                match w.deps.get_mut(&key) {
                    Some(existing) => existing.extend(deps),
                    None => {
                        w.deps.insert(key, deps);
                        cands.push((v, Origin::Recipe));
                    }
                }
            }
        }
        w.candidates.insert(r.name.clone(), cands);
    }
    for (name, _) in &req.targets {
        if set.get(name).is_some_and(|r| r.kind == Kind::Python) {
            root.push((name.clone(), Ranges::full(), String::new()));
            w.root_reasons
                .entry(name.clone())
                .or_insert_with(|| format!("you asked for {name}"));
        }
    }
    for (name, (text, spec)) in &req.pins {
        root.push((name.clone(), ranges(spec), spec.to_string()));
        w.root_reasons.insert(name.clone(), format!("you asked for {text}"));
    }
    w.deps.insert((ROOT.to_string(), Version::new([0])), root);
    w
}

/// Solves `req`. On success, also says for each component not at its newest version why not.
pub fn solve(set: &RecipeSet, py: &PythonFacts, req: &Request) -> Result<Solution, Conflict> {
    let world = build_world(set, py, req);
    let compiled = Compiled::new(&world);
    match pubgrub::resolve(&compiled, ROOT.to_string(), 0u32) {
        Ok(sel) => {
            let chosen: BTreeMap<String, String> = sel
                .into_iter()
                .filter(|(p, _)| p != ROOT)
                .filter_map(|(p, i)| compiled.version(&p, i).map(|v| (p.clone(), v.to_string())))
                .collect();
            Ok(Solution {
                chosen,
                not_newest: BTreeMap::new(),
            })
        }
        Err(PubGrubError::NoSolution(tree)) => {
            let because = explain(&compiled, &tree);
            Err(Conflict {
                ways_out: ways_out(set, py, req, &world, &tree),
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
    match pubgrub::resolve(&compiled, ROOT.to_string(), 0u32) {
        Ok(_) => Ok(()),
        Err(PubGrubError::NoSolution(tree)) => Err(explain(&compiled, &tree)),
        Err(e) => Err(vec![e.to_string()]),
    }
}

type Tree = DerivationTree<String, Cands, String>;

/// Why no candidate of `p` is acceptable: it is adopted, or none of the known versions fits.
fn why_none(world: &World, p: &str, wanted: &str) -> String {
    match world.adopted.get(p) {
        Some(v) => format!("{p} {v} is installed and adopted; kiln does not replace it (--allow-replace {p})"),
        None => {
            let offered: Vec<String> = world
                .candidates
                .get(p)
                .into_iter()
                .flatten()
                .map(|(v, _)| v.to_string())
                .collect();
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
            External::FromDependencyOf(p, _, d, _) if p == ROOT => world
                .root_reasons
                .get(&d)
                .cloned()
                .unwrap_or_else(|| format!("you asked for {d}")),
            External::FromDependencyOf(p, pv, d, dr) => {
                // A requirement no candidate of `d` meets: say why there is none.
                let n = world.candidates.get(&d).map_or(0, |x| x.len().min(MAX_CANDIDATES));
                let avail = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
                let none_fits = dr.0 & avail == 0;
                let versions = c.versions_text(&p, &pv);
                // The specifier as written, from the first version of `p` in the set.
                let first = (0..MAX_CANDIDATES as u32).find(|i| pv.0 & (1 << i) != 0);
                let (text, installed) = match first.and_then(|i| c.version(&p, i).map(|v| (i, v))) {
                    Some((i, v)) => {
                        let text = world
                            .deps
                            .get(&(p.clone(), v.clone()))
                            .and_then(|list| list.iter().find(|(x, _, _)| *x == d).map(|(_, _, t)| t.clone()))
                            .unwrap_or_default();
                        let installed = world
                            .candidates
                            .get(&p)
                            .and_then(|c| c.get(i as usize))
                            .is_some_and(|(_, o)| *o == Origin::Installed);
                        (text, installed)
                    }
                    None => (String::new(), false),
                };
                let text = if text.is_empty() {
                    "(any version)".to_string()
                } else {
                    text
                };
                let edge = if installed {
                    format!("{p} {versions} is installed, and its metadata requires {d} {text}")
                } else {
                    format!("{p} {versions} needs {d} {text}")
                };
                if none_fits {
                    if !lines.contains(&edge) {
                        lines.push(edge);
                    }
                    why_none(world, &d, &format!("satisfies {text}"))
                } else {
                    edge
                }
            }
            External::NoVersions(p, _) => why_none(world, &p, "fits"),
            External::Custom(p, _, m) => format!("{p}: {m}"),
            External::NotRoot(..) => continue,
        };
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

fn collect(tree: &Tree, out: &mut Vec<External<String, Cands, String>>) {
    match tree {
        DerivationTree::External(e) => out.push(e.clone()),
        DerivationTree::Derived(d) => {
            collect(&d.cause1, out);
            collect(&d.cause2, out);
        }
    }
}

/// What the user can do: each relaxation kiln can try is tried, and offered only if it works.
fn ways_out(set: &RecipeSet, py: &PythonFacts, req: &Request, world: &World, tree: &Tree) -> Vec<String> {
    let mut leaves = Vec::new();
    collect(tree, &mut leaves);
    let mut involved: BTreeSet<String> = BTreeSet::new();
    for e in &leaves {
        match e {
            External::FromDependencyOf(p, _, d, _) => {
                involved.insert(p.clone());
                involved.insert(d.clone());
            }
            External::NoVersions(p, _) | External::Custom(p, _, _) => {
                involved.insert(p.clone());
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
    // Drop a user pin.
    for name in involved.iter().filter(|n| req.pins.contains_key(*n)) {
        let mut relaxed = req.clone();
        let (text, _) = relaxed.pins.remove(name).expect("checked above");
        if solve_plain(set, py, &relaxed).is_ok() {
            out.push(format!("drop the pin `{text}` and let kiln choose {name}"));
        }
    }
    // Build a consumer from source against what is installed, where its recipe can.
    for name in involved.iter().filter(|n| {
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
