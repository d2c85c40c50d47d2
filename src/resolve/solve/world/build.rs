//! Building the world: from kiln's recipes, the installed distributions and the request to the
//! numbered packages, candidates and edges of [`World`].
//!
//! Owns which packages take part (only what the request can reach: the targets, the pins, what
//! is installed, and everything any of their versions depends on) and where each constraint
//! comes from: each recipe version's dependencies (a version's own pins replace the recipe's),
//! the `Requires-Dist` of the distributions already installed (kept unless the user names them
//! or allows replacing them), and the user's pins (`torch==2.14.1`). An installed component the
//! user did not name keeps its version: it is "adopted" and only that version is a candidate,
//! unless `--allow-replace NAME`. A component installed under a former name (or as the owner of
//! its import package, see `resolve::owners`) is installed at that distribution's version, and a
//! `Requires-Dist` on a former name is one on the component. Distribution names are compared as
//! `pep508_rs::PackageName`s.
//! Deliberately ignored: `Requires-Dist` lines under an `extra ==` marker (which extras were
//! installed is not recorded; extras of kiln components are its own features) or for another
//! platform or Python (the markers are evaluated for the target interpreter); dependencies on
//! components that are not Python packages (they have no version to choose); metadata lines that
//! do not parse.

use std::collections::BTreeMap;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifier, VersionSpecifiers};
use pep508_rs::PackageName;
use rustc_hash::{FxHashMap, FxHashSet};

use super::{Edge, Id, Origin, ROOT, ROOT_ID, Request, World, public, public_spec};
use crate::probe::python::{Dist, PythonFacts};
use crate::recipe::model::Dependency;
use crate::recipe::{Kind, Recipe, RecipeSet};

/// Each distinct specifier text once, with its specifiers.
#[derive(Default)]
struct Specs {
    list: Vec<(String, VersionSpecifiers)>,
    index: FxHashMap<String, u32>,
}

impl Specs {
    fn intern(&mut self, text: &str, spec: impl FnOnce() -> VersionSpecifiers) -> u32 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push((text.to_string(), public_spec(&spec())));
        self.index.insert(text.to_string(), i);
        i
    }
}

/// The world while it is built.
pub(super) struct Builder<'a> {
    set: &'a RecipeSet,
    py: &'a PythonFacts,
    req: &'a Request,
    w: World<'a>,
    spec_index: Specs,
    /// How many packages the reachable recipes are (the root included); later ones are extras.
    known: usize,
    /// Per reachable package: whether it is a Python package (only those have versions).
    python: Vec<bool>,
    /// Scratch lists for [`Builder::versions`].
    own: Vec<&'a Dependency>,
    shared: Vec<Edge>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(set: &'a RecipeSet, py: &'a PythonFacts, req: &'a Request) -> Builder<'a> {
        let w = World {
            names: Vec::new(),
            ids: FxHashMap::default(),
            span: Vec::new(),
            versions: vec![Version::new([0])],
            origins: vec![Origin::Recipe],
            list_of: vec![0],
            lists: vec![(0, 0)],
            edges: Vec::new(),
            specs: Vec::new(),
            root_reasons: BTreeMap::new(),
            adopted: BTreeMap::new(),
            installed_as: BTreeMap::new(),
            order: Vec::new(),
        };
        Builder {
            set,
            py,
            req,
            w,
            spec_index: Specs::default(),
            known: 0,
            python: Vec::new(),
            own: Vec::new(),
            shared: Vec::new(),
        }
    }

    /// The id of `name`, numbering it if only an installed distribution's metadata or a pin
    /// names it.
    fn id(&mut self, name: &'a str) -> Id {
        if let Some(&i) = self.w.ids.get(name) {
            return i;
        }
        let i = self.w.names.len() as Id;
        self.w.names.push(name);
        self.w.ids.insert(name, i);
        i
    }

    /// The id of `name` if it is a Python package (only those have versions to choose). Every
    /// dependency of a reachable recipe is reachable: look kinds up there, not in the set.
    fn python_id(&mut self, name: &'a str) -> Option<Id> {
        match self.w.ids.get(name) {
            Some(&i) if (i as usize) < self.known => self.python[i as usize].then_some(i),
            _ if self.set.get(name).is_some_and(|r| r.kind == Kind::Python) => Some(self.id(name)),
            _ => None,
        }
    }

    fn spec(&mut self, text: &str, spec: impl FnOnce() -> VersionSpecifiers) -> u32 {
        self.spec_index.intern(text, spec)
    }

    /// The edge to a recipe dependency.
    fn edge(&mut self, d: &'a Dependency, dep: Id) -> Edge {
        Edge {
            dep,
            spec: self.spec(d.version.as_deref().unwrap_or_default(), || {
                d.spec.clone().unwrap_or_default()
            }),
            meta: false,
        }
    }

    /// A new dependency list; its index.
    fn push_list(&mut self, edges: impl IntoIterator<Item = Edge>) -> u32 {
        let start = self.w.edges.len() as u32;
        self.w.edges.extend(edges);
        self.w.lists.push((start, self.w.edges.len() as u32));
        self.w.lists.len() as u32 - 1
    }

    /// A new dependency list holding lists `a` and then `b`; its index.
    fn push_merged(&mut self, a: u32, b: u32) -> u32 {
        let start = self.w.edges.len() as u32;
        for l in [a, b] {
            let (x, y) = self.w.lists[l as usize];
            self.w.edges.extend_from_within(x as usize..y as usize);
        }
        self.w.lists.push((start, self.w.edges.len() as u32));
        self.w.lists.len() as u32 - 1
    }

    pub(super) fn build(mut self) -> World<'a> {
        let (set, py, req) = (self.set, self.py, self.req);
        // Components by distribution name, and those installed (nothing to match when nothing
        // is installed).
        let mut by_dist: FxHashMap<PackageName, &'a str> = FxHashMap::default();
        let mut installed: FxHashMap<&'a str, &'a Dist> = FxHashMap::default();
        if !py.dists.is_empty() {
            for r in set.recipes.values() {
                let Some(d) = r.dist.as_deref().and_then(|d| PackageName::from_str(d).ok()) else {
                    continue;
                };
                // Installed under its own name, a former one, or as the owner of its package.
                if let Some(found) = crate::resolve::owners::provider(r, py) {
                    installed.insert(r.name.as_str(), found.dist);
                    if found.via != crate::resolve::owners::Via::Own {
                        self.w.installed_as.insert(r.name.clone(), found.dist.name.clone());
                    }
                }
                by_dist.insert(d, r.name.as_str());
                for f in r.former.iter().filter_map(|f| PackageName::from_str(f).ok()) {
                    by_dist.entry(f).or_insert(r.name.as_str());
                }
            }
        }
        // Only what the request can reach matters: the targets, the pins, what is installed, and
        // everything any of their versions depends on, in dependency order.
        let owned: Vec<(String, Vec<String>)>;
        let roots: &[(String, Vec<String>)] = if req.pins.is_empty() && installed.is_empty() {
            &req.targets
        } else {
            let mut roots = req.targets.clone();
            roots.extend(req.pins.keys().map(|n| (n.clone(), Vec::new())));
            let mut installed_names: Vec<&str> = installed.keys().copied().collect();
            installed_names.sort_unstable();
            roots.extend(installed_names.iter().map(|n| (n.to_string(), Vec::new())));
            owned = roots;
            &owned
        };
        let reachable = set.closure_of(roots);
        // Number the packages in name order, the root first.
        let mut names: Vec<&'a str> = Vec::with_capacity(reachable.len() + 1);
        names.push(ROOT);
        names.extend(reachable.iter().map(|(r, _)| r.name.as_str()));
        names[1..].sort_unstable();
        self.w.ids = names.iter().enumerate().map(|(i, n)| (*n, i as Id)).collect();
        self.w.names = names;
        self.known = self.w.names.len();
        self.python = vec![false; self.known];
        self.w.order = vec![0; self.known];
        self.w.order[ROOT_ID as usize] = u32::MAX;
        for (position, (r, _)) in reachable.iter().enumerate() {
            let i = self.w.ids[r.name.as_str()] as usize;
            self.w.order[i] = position as u32;
            self.python[i] = r.kind == Kind::Python;
        }
        self.w.span = vec![(0, 0); self.known];
        self.w.span[ROOT_ID as usize] = (0, 1);
        let named: FxHashSet<&str> = req
            .targets
            .iter()
            .map(|(n, _)| n.as_str())
            .chain(req.pins.keys().map(String::as_str))
            .collect();
        let markers = py.python.marker_environment();
        let mut root: Vec<Edge> = Vec::new();
        for (r, features) in reachable.iter().filter(|(r, _)| r.kind == Kind::Python) {
            let replaceable = named.contains(r.name.as_str()) || req.allow_replace.contains(&r.name);
            let installed = installed.get(r.name.as_str()).copied();
            if let Some(edge) = self.component(r, features, replaceable, installed, &by_dist, markers.as_ref()) {
                root.push(edge);
            }
        }
        // Targets need no reason of their own: "you asked for NAME" is the default.
        for (name, _) in &req.targets {
            if let Some(dep) = self.python_id(name) {
                let edge = Edge {
                    dep,
                    spec: self.spec("", VersionSpecifiers::empty),
                    meta: false,
                };
                root.push(edge);
            }
        }
        for (name, (text, spec)) in &req.pins {
            let edge = Edge {
                dep: self.id(name),
                spec: self.spec(&spec.to_string(), || spec.clone()),
                meta: false,
            };
            root.push(edge);
            self.w
                .root_reasons
                .insert(name.clone(), format!("you asked for {text}"));
        }
        // Preferences hold like pins, each with its own reason (a pin of the user's wins).
        for (name, p) in req.prefer.iter().filter(|(n, _)| !req.pins.contains_key(*n)) {
            let edge = Edge {
                dep: self.id(name),
                spec: self.spec(&p.spec.to_string(), || p.spec.clone()),
                meta: false,
            };
            root.push(edge);
            let why = match self.w.root_reasons.remove(name) {
                Some(other) => format!("{other}; {}", p.why),
                None => p.why.clone(),
            };
            self.w.root_reasons.insert(name.clone(), why);
        }
        let start = self.w.edges.len() as u32;
        self.w.edges.extend(root);
        self.w.lists[0] = (start, self.w.edges.len() as u32);
        let n = self.w.names.len();
        self.w.span.resize(n, (0, 0));
        self.w.order.resize(n, 0);
        self.w.specs = self.spec_index.list;
        self.w
    }

    /// The candidates of one reachable Python component and their dependency lists; the edge
    /// from the root when it is installed.
    fn component(
        &mut self,
        r: &'a Recipe,
        features: &[&str],
        replaceable: bool,
        installed: Option<&'a Dist>,
        by_dist: &FxHashMap<PackageName, &'a str>,
        markers: Option<&pep508_rs::MarkerEnvironment>,
    ) -> Option<Edge> {
        let name = r.name.as_str();
        let me = self.w.ids[name];
        let start = self.w.versions.len() as u32;
        let installed = installed.and_then(|d| Version::from_str(&d.version).ok().map(|v| (public(&v), d)));
        let mut root = None;
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
                    if !rq.marker.evaluate_optional_environment(markers, &[]) {
                        continue;
                    }
                    let Some(comp) = by_dist.get(&rq.name) else { continue };
                    let spec = match &rq.version_or_url {
                        Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => s.clone(),
                        _ => VersionSpecifiers::empty(),
                    };
                    deps.push(Edge {
                        dep: self.id(comp),
                        spec: self.spec(&spec.to_string(), || spec.clone()),
                        meta: true,
                    });
                }
                self.w.versions.push(v.clone());
                self.w.origins.push(Origin::Installed);
                let list = self.push_list(deps);
                self.w.list_of.push(list);
            }
            let spec = if replaceable {
                // Installed and replaceable: some version of it must still fit everything else.
                self.w
                    .root_reasons
                    .insert(r.name.clone(), format!("{name} {v} is installed"));
                self.spec("", VersionSpecifiers::empty)
            } else {
                self.w.adopted.insert(r.name.clone(), v.clone());
                self.w
                    .root_reasons
                    .insert(r.name.clone(), format!("{name} {v} is installed and adopted"));
                self.spec(&format!("=={v}"), || VersionSpecifier::equals_version(v.clone()).into())
            };
            root = Some(Edge {
                dep: me,
                spec,
                meta: false,
            });
        }
        if !self.w.adopted.contains_key(name) {
            self.versions(r, features, start);
        }
        self.w.span[me as usize] = (start, self.w.versions.len() as u32);
        root
    }

    /// The recipe's versions as candidates of its component (whose candidates so far start at
    /// `start`).
    fn versions(&mut self, r: &'a Recipe, features: &[&str], start: u32) {
        let features: Vec<String> = features.iter().map(|f| f.to_string()).collect();
        // The component's own dependencies: one list, shared by every version without pins of
        // its own.
        // (The two lists are the builder's, reused: a world has thousands of components.)
        let mut own = std::mem::take(&mut self.own);
        own.clear();
        self.shared.clear();
        for d in r.depends_with(&features) {
            if let Some(id) = self.python_id(&d.name) {
                own.push(d);
                let edge = self.edge(d, id);
                self.shared.push(edge);
            }
        }
        let shared = std::mem::take(&mut self.shared);
        let mut shared_list = None;
        // A version whose own Requires-Python refuses this interpreter is no candidate here.
        let interpreter = Version::from_str(&self.py.python.version).ok();
        let runs_here = |e: &crate::recipe::model::VersionEntry| match (&e.python, &interpreter) {
            (Some(spec), Some(py)) => spec.contains(py),
            _ => true,
        };
        for e in r.versions.iter().filter(|e| runs_here(e)) {
            let v = public(&e.version);
            let list = if e.depends.is_empty() {
                match shared_list {
                    Some(l) => l,
                    None => *shared_list.insert(self.push_list(shared.iter().copied())),
                }
            } else {
                let mut deps: Vec<Edge> = own
                    .iter()
                    .zip(&shared)
                    .filter(|(d, _)| !e.depends.iter().any(|o| o.name == d.name))
                    .map(|(_, x)| *x)
                    .collect();
                for d in &e.depends {
                    if let Some(id) = self.python_id(&d.name) {
                        deps.push(self.edge(d, id));
                    }
                }
                self.push_list(deps)
            };
            // An installed version that the recipe also describes uses the recipe's pins
            // merged with its metadata (both must hold to keep or rebuild it).
            let mine = &self.w.versions[start as usize..];
            match mine.iter().position(|x| *x == v) {
                Some(i) => {
                    let at = start as usize + i;
                    self.w.list_of[at] = self.push_merged(self.w.list_of[at], list);
                }
                None => {
                    self.w.versions.push(v);
                    self.w.origins.push(Origin::Recipe);
                    self.w.list_of.push(list);
                }
            }
        }
        self.own = own;
        self.shared = shared;
    }
}
