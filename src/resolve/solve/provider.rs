//! The search: the world compiled for PubGrub, where a version is a candidate's index and a set
//! of versions is a bitmask ([`Cands`]), so every set operation is one machine instruction.
//!
//! Owns the PubGrub [`DependencyProvider`] (which package to decide next, which version to try,
//! each candidate's dependencies as bitmasks) and a fast path that runs the same search without
//! PubGrub's bookkeeping while nothing conflicts ([`Compiled::solve`] says why the answer is the
//! same). Deliberately ignores what versions mean (the world applied PEP 440 once, when it
//! computed each specifier's bitmask) and how a failure reads (`explain` renders PubGrub's
//! derivation tree).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use pep440_rs::Version;
use pubgrub::{Dependencies, DependencyConstraints, DependencyProvider, PackageResolutionStatistics, PubGrubError};
use rustc_hash::FxHashMap;

use super::world::{Id, ROOT_ID, World, admitted};

/// A set of candidate versions of one package, as bits: bit `i` is the package's `i`-th
/// candidate in order of preference. Every set operation is one machine instruction, which is
/// what keeps 10,000-component resolutions fast; the PEP 440 specifiers are applied once, when
/// the world is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cands(pub u64);

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
pub(super) const MAX_CANDIDATES: usize = 64;

/// The bits of a package's candidates that exist.
pub(super) fn available(n: usize) -> u64 {
    if n >= MAX_CANDIDATES { u64::MAX } else { (1u64 << n) - 1 }
}

/// The chosen candidate index of each package (by [`Id`]), [`NONE`] where none is chosen.
pub(super) type Chosen = Vec<u32>;

/// No candidate chosen.
pub(super) const NONE: u32 = u32::MAX;

/// The world compiled for PubGrub: versions are candidate indexes, version sets are bitmasks,
/// each dependency list merged per package and sorted (parallel to the world's lists, flat).
pub(super) struct Compiled<'w> {
    pub world: &'w World<'w>,
    deps: Vec<(Id, Cands)>,
    /// Per world list: its range of `deps`.
    lists: Vec<(u32, u32)>,
    /// Per package: a number shared by the packages with the same candidate versions.
    same: Vec<u32>,
}

/// A package's candidate versions, compared as `pep440_rs` matches and prints them: equal
/// versions with as many release segments (`1.0` equals `1.0.0` but prints otherwise).
#[derive(Clone, Copy)]
struct Exact<'w>(&'w [Version]);

impl PartialEq for Exact<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && (self.0.iter().zip(other.0)).all(|(a, b)| a == b && a.release().len() == b.release().len())
    }
}

impl Eq for Exact<'_> {}

impl std::hash::Hash for Exact<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for v in self.0 {
            v.hash(state);
            v.release().len().hash(state);
        }
    }
}

impl<'w> Compiled<'w> {
    pub fn new(world: &'w World<'w>) -> Compiled<'w> {
        // Packages often offer the same versions (`2.0.0`, `1.0.0`): number each list of
        // candidates once, so that each specifier is matched against each list once.
        let mut seen: FxHashMap<Exact<'w>, u32> = FxHashMap::default();
        let same: Vec<u32> = (0..world.len() as Id)
            .map(|p| {
                let next = seen.len() as u32;
                *seen.entry(Exact(world.candidates(p))).or_insert(next)
            })
            .collect();
        let mut masks: FxHashMap<(u32, u32), Cands> = FxHashMap::default();
        let mut deps: Vec<(Id, Cands)> = Vec::with_capacity(world.list_count() * 3);
        let mut lists = Vec::with_capacity(world.list_count());
        let mut list: Vec<(Id, Cands)> = Vec::new();
        for l in 0..world.list_count() as u32 {
            list.clear();
            list.extend(world.list(l).iter().map(|e| {
                let mask = masks
                    .entry((same[e.dep as usize], e.spec))
                    .or_insert_with(|| Cands(admitted(world.spec(e.spec), world.candidates(e.dep))));
                (e.dep, *mask)
            }));
            list.sort_by_key(|(d, _)| *d);
            // One entry per package: both constraints hold.
            list.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1.0 &= later.1.0;
                }
                same
            });
            let start = deps.len() as u32;
            deps.extend_from_slice(&list);
            lists.push((start, deps.len() as u32));
        }
        Compiled {
            world,
            deps,
            lists,
            same,
        }
    }

    /// The dependencies of `p`'s candidate `i`, one entry per package, sorted.
    fn deps_of(&self, p: Id, i: u32) -> &[(Id, Cands)] {
        self.world.list_of(p, i).map_or(&[], |l| {
            let (a, b) = self.lists[l as usize];
            &self.deps[a as usize..b as usize]
        })
    }

    pub fn version(&self, p: Id, i: u32) -> Option<&Version> {
        self.world.candidates(p).get(i as usize)
    }

    pub fn name(&self, p: Id) -> &str {
        self.world.names[p as usize]
    }

    /// The chosen versions by component name, as text (the root left out).
    pub fn chosen_text(&self, chosen: &Chosen) -> BTreeMap<String, String> {
        // Printing a version is slow next to the rest: each distinct one once.
        let mut texts: FxHashMap<(u32, u32), String> = FxHashMap::default();
        chosen
            .iter()
            .enumerate()
            .filter(|(p, _)| *p != ROOT_ID as usize)
            .filter_map(|(p, &i)| {
                let v = self.version(p as Id, i)?;
                let text = texts.entry((self.same[p], i)).or_insert_with(|| v.to_string());
                Some((self.name(p as Id).to_string(), text.clone()))
            })
            .collect()
    }

    /// Solves the compiled world: the chosen candidate of each package, or PubGrub's error.
    ///
    /// First the fast path: PubGrub's own search, step for step, as long as nothing conflicts.
    /// Until its first conflict PubGrub never backtracks, and each step is: pick the undecided
    /// package with a derived range and the highest priority, choose the first candidate in that
    /// range, and intersect each dependency's range with what the chosen candidate requires. With
    /// no conflict yet, [`Self::prioritize`]'s conflict count is 0 for every package, so the
    /// highest priority is the highest dependency-order position, and positions are distinct
    /// among packages that have candidates (one without any is a conflict). Every conflict PubGrub
    /// could meet (no candidate left in a range, a chosen candidate outside a range a later
    /// decision requires, a package depending on itself) makes the fast path give up, and
    /// PubGrub then solves from the start: its answer and its explanations are always the ones
    /// PubGrub alone gives.
    pub fn solve(&self) -> Result<Chosen, PubGrubError<Self>> {
        match self.without_conflicts() {
            Some(chosen) => {
                // Every debug build (every test) checks the claim above against PubGrub itself.
                if cfg!(debug_assertions) {
                    assert_eq!(
                        self.with_pubgrub().ok(),
                        Some(chosen.clone()),
                        "fast path and PubGrub differ"
                    );
                }
                Ok(chosen)
            }
            None => self.with_pubgrub(),
        }
    }

    /// PubGrub's answer, without the fast path.
    pub(super) fn with_pubgrub(&self) -> Result<Chosen, PubGrubError<Self>> {
        let mut chosen = vec![NONE; self.world.len()];
        for (p, i) in pubgrub::resolve(self, ROOT_ID, 0u32)? {
            chosen[p as usize] = i;
        }
        Ok(chosen)
    }

    /// PubGrub's search while nothing conflicts (see [`Self::solve`]); `None` at the first
    /// conflict.
    pub(super) fn without_conflicts(&self) -> Option<Chosen> {
        let world = self.world;
        let n = world.len();
        let mut chosen: Chosen = vec![NONE; n];
        // The intersection of what the decided packages require, per package (`None`: nothing
        // requires it yet, so it is not up for a decision).
        let mut range: Vec<Option<u64>> = vec![None; n];
        range[ROOT_ID as usize] = Some(1);
        let mut next: BinaryHeap<(u32, Id)> = BinaryHeap::new();
        next.push((world.order[ROOT_ID as usize], ROOT_ID));
        while let Some((_, p)) = next.pop() {
            let cands = range[p as usize]? & available(world.candidates(p).len());
            if cands == 0 {
                return None;
            }
            let i = cands.trailing_zeros();
            chosen[p as usize] = i;
            for &(d, Cands(set)) in self.deps_of(p, i) {
                if d == p {
                    return None;
                }
                match chosen[d as usize] {
                    NONE => {}
                    c if set & (1 << c) == 0 => return None,
                    _ => continue,
                }
                let r = match &mut range[d as usize] {
                    Some(r) => r,
                    r @ None => {
                        next.push((world.order[d as usize], d));
                        r.insert(u64::MAX)
                    }
                };
                *r &= set;
                if *r & available(world.candidates(d).len()) == 0 {
                    return None;
                }
            }
        }
        Some(chosen)
    }
}

impl DependencyProvider for Compiled<'_> {
    type P = Id;
    type V = u32;
    type VS = Cands;
    /// Packages that caused more conflicts first, then dependents before their dependencies,
    /// then those with fewer candidate versions.
    type Priority = (u32, u32, Reverse<u32>);
    type M = String;
    type Err = std::convert::Infallible;

    fn prioritize(&self, package: &Id, range: &Cands, stats: &PackageResolutionStatistics) -> Self::Priority {
        let avail = available(self.world.candidates(*package).len());
        (
            stats.conflict_count(),
            self.world.order[*package as usize],
            Reverse((range.0 & avail).count_ones()),
        )
    }

    fn choose_version(&self, package: &Id, range: &Cands) -> Result<Option<u32>, Self::Err> {
        let n = self.world.candidates(*package).len().min(MAX_CANDIDATES) as u32;
        Ok((0..n).find(|i| range.0 & (1 << i) != 0))
    }

    fn get_dependencies(&self, package: &Id, version: &u32) -> Result<Dependencies<Id, Cands, String>, Self::Err> {
        Ok(Dependencies::Available(
            self.deps_of(*package, *version)
                .iter()
                .copied()
                .collect::<DependencyConstraints<Id, Cands>>(),
        ))
    }
}
