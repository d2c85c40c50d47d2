//! The dependency graph of a recipe set: the closure of some targets in execution order, and
//! the cycles a set must not have. Both walk borrowed names with hash maps from `rustc-hash`, so
//! that a set of ten thousand recipes is walked in milliseconds.
//!
//! It ignores versions, with one exception: the closure includes every version's own pins,
//! because the solver may pick any of them, unless the caller names the version it judges (the
//! installed one: [`RecipeSet::closure_as_installed`]); then only that version's pins count.

use std::collections::BTreeSet;

use petgraph::algo::TarjanScc;
use petgraph::graph::{DiGraph, NodeIndex};
use rustc_hash::{FxHashMap, FxHashSet};

use super::RecipeSet;
use crate::recipe::model::{Dependency, Recipe};

impl RecipeSet {
    /// The targets and everything they depend on, with the features each needs, in execution
    /// order (dependencies first; ties broken by name so the order is stable).
    pub fn closure(&self, targets: &[(String, Vec<String>)]) -> Vec<(String, Vec<String>)> {
        self.closure_of(targets)
            .into_iter()
            .map(|(r, f)| (r.name.clone(), f.into_iter().map(str::to_string).collect()))
            .collect()
    }

    /// [`RecipeSet::closure`], borrowing: the recipes themselves and their features' names.
    /// Unknown target names are skipped.
    pub fn closure_of<'a: 't, 't>(&'a self, targets: &'t [(String, Vec<String>)]) -> Vec<(&'a Recipe, Vec<&'t str>)> {
        self.closure_picking(targets, &|_| None)
    }

    /// The closure as installed versions need it: where `installed` gives a recipe's installed
    /// version and one of its `[[versions]]` is that version, only that version's pins are
    /// followed (sglang 0.5.11 installed needs none of the kernel packages only 0.5.23 pins);
    /// elsewhere every version's, as in [`RecipeSet::closure`].
    pub fn closure_as_installed(
        &self,
        targets: &[(String, Vec<String>)],
        installed: &dyn Fn(&Recipe) -> Option<pep440_rs::Version>,
    ) -> Vec<(String, Vec<String>)> {
        self.closure_picking(targets, installed)
            .into_iter()
            .map(|(r, f)| (r.name.clone(), f.into_iter().map(str::to_string).collect()))
            .collect()
    }

    fn closure_picking<'a: 't, 't>(
        &'a self,
        targets: &'t [(String, Vec<String>)],
        installed: &dyn Fn(&Recipe) -> Option<pep440_rs::Version>,
    ) -> Vec<(&'a Recipe, Vec<&'t str>)> {
        let mut features: FxHashMap<&'t str, (&'a Recipe, BTreeSet<&'t str>)> = FxHashMap::default();
        let mut stack: Vec<(&'t str, &'t [String])> = targets.iter().map(|(n, f)| (n.as_str(), f.as_slice())).collect();
        while let Some((name, feats)) = stack.pop() {
            let known = features.get(name).map(|(r, _)| *r);
            let Some(r) = known.or_else(|| self.recipes.get(name)) else {
                continue;
            };
            let seen = known.is_some();
            let (_, entry) = features.entry(r.name.as_str()).or_insert_with(|| (r, BTreeSet::new()));
            let before = entry.len();
            entry.extend(feats.iter().map(String::as_str));
            if seen && entry.len() == before {
                continue;
            }
            let all: Vec<String> = entry.iter().map(|f| f.to_string()).collect();
            // Every version's own pins too (the solver may pick any of them), or only the
            // installed version's where the caller judges that one.
            let have = installed(r).filter(|v| r.versions.iter().any(|e| &e.version == v));
            let versions = r
                .versions
                .iter()
                .filter(|e| have.as_ref().is_none_or(|v| &e.version == v));
            for d in r.depends_with(&all).chain(versions.flat_map(|v| v.depends.iter())) {
                // Skip what is already known with these features (most edges, in large sets).
                if features
                    .get(d.name.as_str())
                    .is_some_and(|(_, k)| d.features.iter().all(|f| k.contains(f.as_str())))
                {
                    continue;
                }
                stack.push((d.name.as_str(), d.features.as_slice()));
            }
        }
        // Topological order, dependencies first: depth-first from each name in name order,
        // each recipe's dependencies in name order.
        let mut names: Vec<&'t str> = features.keys().copied().collect();
        names.sort_unstable();
        let mut out = Vec::with_capacity(names.len());
        let mut done: FxHashSet<&'t str> = FxHashSet::default();
        fn visit<'a: 't, 't>(
            n: &'t str,
            features: &FxHashMap<&'t str, (&'a Recipe, BTreeSet<&'t str>)>,
            done: &mut FxHashSet<&'t str>,
            out: &mut Vec<(&'a Recipe, Vec<&'t str>)>,
        ) {
            if !done.insert(n) {
                return;
            }
            let (r, feats) = &features[n];
            for d in r.depends_sorted.iter().filter(|d| features.contains_key(d.as_str())) {
                visit(d, features, done, out);
            }
            out.push((r, feats.iter().copied().collect()));
        }
        for n in names {
            visit(n, &features, &mut done, &mut out);
        }
        out
    }
}

impl Recipe {
    /// Every dependency, including those of all features and versions.
    pub fn depends_all(&self) -> impl Iterator<Item = &Dependency> {
        self.depends
            .iter()
            .chain(self.features.values().flat_map(|f| f.depends.iter()))
            .chain(self.versions.iter().flat_map(|v| v.depends.iter()))
    }
}

/// The dependency graph of `list` (the recipes in name order, `index` their positions by name):
/// node `i` is the `i`th recipe, with an edge per distinct known dependency name; and, per recipe,
/// whether it names a component that is not in the set.
pub(super) fn graph<'a>(list: &[&'a Recipe], index: &FxHashMap<&str, usize>) -> (DiGraph<&'a str, ()>, Vec<bool>) {
    let mut g: DiGraph<&str, ()> = DiGraph::with_capacity(list.len(), 4 * list.len());
    for r in list {
        g.add_node(r.name.as_str());
    }
    let mut unknown = vec![false; list.len()];
    for (i, r) in list.iter().enumerate() {
        // `depends_sorted` holds each name once, so no edge is added twice.
        for name in &r.depends_sorted {
            match index.get(name.as_str()) {
                Some(&to) => {
                    g.add_edge(NodeIndex::new(i), NodeIndex::new(to), ());
                }
                None => unknown[i] = true,
            }
        }
    }
    (g, unknown)
}

/// Each cycle in the graph, as the list of components on it, starting at the smallest name.
pub(super) fn cycles(g: &DiGraph<&str, ()>) -> Vec<Vec<String>> {
    let mut sccs = Vec::new();
    TarjanScc::new().run(&g, |scc: &[NodeIndex]| {
        let self_loop = scc.len() == 1 && g.contains_edge(scc[0], scc[0]);
        if scc.len() >= 2 || self_loop {
            sccs.push(scc.to_vec());
        }
    });
    let mut out = Vec::new();
    for scc in sccs {
        let members: BTreeSet<NodeIndex> = scc.iter().copied().collect();
        let start = *scc.iter().min_by_key(|n| g[**n]).expect("scc is not empty");
        // Walk inside the component from `start` back to `start` (DFS), giving one named cycle.
        let mut path = vec![start];
        let mut seen = BTreeSet::from([start]);
        fn dfs(
            g: &DiGraph<&str, ()>,
            members: &BTreeSet<NodeIndex>,
            start: NodeIndex,
            path: &mut Vec<NodeIndex>,
            seen: &mut BTreeSet<NodeIndex>,
        ) -> bool {
            let cur = *path.last().expect("path starts non-empty");
            let mut next: Vec<NodeIndex> = g.neighbors(cur).filter(|n| members.contains(n)).collect();
            next.sort_by_key(|n| g[*n]);
            for n in next {
                if n == start {
                    return true;
                }
                if seen.insert(n) {
                    path.push(n);
                    if dfs(g, members, start, path, seen) {
                        return true;
                    }
                    path.pop();
                }
            }
            false
        }
        dfs(g, &members, start, &mut path, &mut seen);
        out.push(path.into_iter().map(|n| g[n].to_string()).collect());
    }
    out.sort();
    out
}
