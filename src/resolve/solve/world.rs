//! The solver's world: what PubGrub is told, as plain numbered data, and the one place PEP 440
//! is applied.
//!
//! Owns the numbering of packages (the root first, then the reachable components in name
//! order), each package's candidate versions in order of preference with their origin, each
//! candidate's dependency edges with the specifier as written, the reasons the request depends on
//! a package, and which installed components are adopted. `build` fills it from the recipes, the
//! installed distributions and the request.
//!
//! PEP 440 matching is `pep440_rs`'s own ([`VersionSpecifiers::contains`]), asked once per
//! candidate by [`admitted`]; nothing here compares versions by hand. Deliberately ignored: local
//! version labels (`+cu130`), dropped from candidates and specifiers alike, since the installed
//! `2.9.0+cu130` and the recipe's `2.9.0` are one version to kiln. The search itself is
//! `provider`'s, the wording of failures `explain`'s.

mod build;

use std::collections::BTreeMap;

use pep440_rs::{Version, VersionSpecifier, VersionSpecifiers};
use rustc_hash::FxHashMap;

use super::Request;
use crate::probe::python::PythonFacts;
use crate::recipe::RecipeSet;

/// The name of PubGrub's root package: the request itself.
pub(super) const ROOT: &str = "<your request>";

/// A package inside the solver: an index into [`World::names`]. Interning the names keeps
/// strings out of the search (PubGrub hashes and clones packages constantly).
pub(super) type Id = u32;

/// The request itself, as PubGrub's root package.
pub(super) const ROOT_ID: Id = 0;

/// Where a candidate version comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    Installed,
    Recipe,
}

/// A dependency edge of one candidate: the component, the specifier as written (an index
/// into [`World::specs`]), and whether an installed distribution's metadata (`Requires-Dist`)
/// says it rather than a recipe or the request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Edge {
    pub dep: Id,
    pub spec: u32,
    pub meta: bool,
}

/// kiln's world in PubGrub's terms. Packages are numbered in name order (the root first; a
/// package only an installed distribution's metadata or a pin names comes last), so that
/// dependency lists sorted by number are sorted by name and explanations do not depend on the
/// order recipes were read in. The per-package and per-list data lie in flat arrays with index
/// ranges (one allocation each, not one per package: worlds have 10,000 packages).
pub(super) struct World<'a> {
    pub names: Vec<&'a str>,
    ids: FxHashMap<&'a str, Id>,
    /// Per package: its candidates, a range of indexes into `versions`, `origins` and `list_of`.
    span: Vec<(u32, u32)>,
    /// Candidate versions, each package's in order of preference (local labels dropped).
    versions: Vec<Version>,
    origins: Vec<Origin>,
    /// Per candidate: its dependency list (an index into `lists`).
    list_of: Vec<u32>,
    /// The distinct dependency lists, as ranges of `edges`: the versions of one recipe usually
    /// share theirs. List 0 is the root's.
    lists: Vec<(u32, u32)>,
    edges: Vec<Edge>,
    /// Each distinct specifier text once, with its specifiers (local labels dropped).
    specs: Vec<(String, VersionSpecifiers)>,
    /// Why the root depends on a package: "you asked for", "installed", ...
    pub root_reasons: BTreeMap<String, String>,
    /// Installed components that must keep their version.
    pub adopted: BTreeMap<String, Version>,
    /// Installed components whose distribution is not their own (a former name), by component.
    pub installed_as: BTreeMap<String, String>,
    /// Position in dependency order (dependencies first), per package. Deciding dependents
    /// before their dependencies means every cap on a component is known before its version is
    /// chosen, which spares most backtracking.
    pub order: Vec<u32>,
}

impl<'a> World<'a> {
    /// The number of packages, the root included.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn id(&self, name: &str) -> Option<Id> {
        self.ids.get(name).copied()
    }

    /// The candidate versions of `p`, in order of preference.
    pub fn candidates(&self, p: Id) -> &[Version] {
        let (a, b) = self.span[p as usize];
        &self.versions[a as usize..b as usize]
    }

    pub fn candidates_of(&self, name: &str) -> &[Version] {
        self.id(name).map_or(&[], |p| self.candidates(p))
    }

    /// Where `p`'s candidate `i` comes from.
    pub fn origin(&self, p: Id, i: u32) -> Option<Origin> {
        let (a, b) = self.span[p as usize];
        (i < b - a).then(|| self.origins[(a + i) as usize])
    }

    /// The number of distinct dependency lists.
    pub fn list_count(&self) -> usize {
        self.lists.len()
    }

    /// The edges of dependency list `l`.
    pub fn list(&self, l: u32) -> &[Edge] {
        let (a, b) = self.lists[l as usize];
        &self.edges[a as usize..b as usize]
    }

    /// The dependency list of `p`'s candidate `i`.
    pub fn list_of(&self, p: Id, i: u32) -> Option<u32> {
        let (a, b) = self.span[p as usize];
        (i < b - a).then(|| self.list_of[(a + i) as usize])
    }

    /// The specifiers of spec `s` (an [`Edge::spec`]).
    pub fn spec(&self, s: u32) -> &VersionSpecifiers {
        &self.specs[s as usize].1
    }

    /// The specifier texts of `p`'s candidate `i` on `d`, each with whether it comes from the
    /// installed distribution's metadata, each text once (an installed version the recipe also
    /// describes has both).
    pub fn spec_texts(&self, p: Id, i: u32, d: Id) -> Vec<(&str, bool)> {
        let mut out: Vec<(&str, bool)> = Vec::new();
        for e in self.list_of(p, i).into_iter().flat_map(|l| self.list(l)) {
            let text = self.specs[e.spec as usize].0.as_str();
            if e.dep == d && !out.iter().any(|(t, _)| *t == text) {
                out.push((text, e.meta));
            }
        }
        out
    }

    /// Everything the solver is told about `req`.
    pub fn build(set: &'a RecipeSet, py: &'a PythonFacts, req: &'a Request) -> World<'a> {
        build::Builder::new(set, py, req).build()
    }
}

/// The bits of `candidates` (bit `i` for the `i`-th, at most 64) that `spec` admits, by
/// `pep440_rs`'s own matching: exact for every operator, pre-, post- and dev-release and epoch.
pub(super) fn admitted(spec: &VersionSpecifiers, candidates: &[Version]) -> u64 {
    candidates
        .iter()
        .take(64)
        .enumerate()
        .filter(|(_, v)| spec.contains(v))
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

/// `v` without its local label; a plain clone when it has none (`without_local` copies the
/// version whenever it is shared).
pub(super) fn public(v: &Version) -> Version {
    if v.is_local() {
        v.clone().without_local()
    } else {
        v.clone()
    }
}

/// `spec` with local labels dropped from its versions (`==2.9.0+cu130` matches what `==2.9.0`
/// does), the same way they are dropped from candidates.
pub(super) fn public_spec(spec: &VersionSpecifiers) -> VersionSpecifiers {
    if !spec.iter().any(|s| s.version().is_local()) {
        return spec.clone();
    }
    spec.iter()
        .map(|s| {
            VersionSpecifier::from_version(*s.operator(), s.version().clone().without_local())
                .unwrap_or_else(|_| s.clone())
        })
        .collect()
}
