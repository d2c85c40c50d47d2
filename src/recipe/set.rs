//! A validated set of recipes: loading (embedded or from a directory), the checks that need all
//! files at once (file name = component name, unknown dependencies and features, cycles), and the
//! dependency graph queries the planner needs (closure of targets, execution order).
//!
//! It deliberately ignores versions of dependencies beyond parsing them: choosing versions is the
//! resolver's job.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use include_dir::{Dir, include_dir};
use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use rustc_hash::{FxHashMap, FxHashSet};

use super::diag::{Diagnostic, Diagnostics};
use super::model::Recipe;
use super::parse::parse;

static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/recipes");

/// Why a recipe set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read recipe directory `{path}`: {source}")]
    ReadDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("recipe directory `{0}` holds no `*.toml` files")]
    Empty(String),
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// All recipes, by component name.
#[derive(Debug, Clone)]
pub struct RecipeSet {
    pub recipes: BTreeMap<String, Recipe>,
    /// `embedded` or the directory they were read from.
    pub origin: String,
}

impl RecipeSet {
    /// The recipes compiled into kiln.
    pub fn embedded() -> Result<RecipeSet, LoadError> {
        let mut files: Vec<(String, String, Option<std::path::PathBuf>)> = EMBEDDED
            .files()
            .filter(|f| f.path().extension().is_some_and(|e| e == "toml"))
            .map(|f| {
                (
                    format!("<embedded>/{}", f.path().display()),
                    String::from_utf8_lossy(f.contents()).into_owned(),
                    None,
                )
            })
            .collect();
        files.sort();
        Self::from_files(files, "embedded".into())
    }

    /// Every `*.toml` in `dir`.
    pub fn from_dir(dir: &Path) -> Result<RecipeSet, LoadError> {
        let read_err = |source| LoadError::ReadDir {
            path: dir.display().to_string(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_err)? {
            let path = entry.map_err(read_err)?.path();
            if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
                let bytes = std::fs::read(&path).map_err(read_err)?;
                files.push((
                    path.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                    Some(dir.to_path_buf()),
                ));
            }
        }
        if files.is_empty() {
            return Err(LoadError::Empty(dir.display().to_string()));
        }
        files.sort();
        Self::from_files(files, dir.display().to_string())
    }

    /// Recipes given as `(file name, text)` pairs (benchmarks, tools that generate recipes).
    pub fn from_texts(files: Vec<(String, String)>, origin: &str) -> Result<RecipeSet, LoadError> {
        Self::from_files(
            files.into_iter().map(|(f, t)| (f, t, None)).collect(),
            origin.to_string(),
        )
    }

    fn from_files(
        files: Vec<(String, String, Option<std::path::PathBuf>)>,
        origin: String,
    ) -> Result<RecipeSet, LoadError> {
        let mut diags = Vec::new();
        let mut recipes = BTreeMap::new();
        let mut rejected = Vec::new();
        let stems: BTreeSet<String> = files
            .iter()
            .filter_map(|(f, _, _)| Path::new(f).file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        let sources: HashMap<String, String> = files.iter().map(|(f, s, _)| (f.clone(), s.clone())).collect();
        for (file, src, dir) in files {
            match parse(&file, &src, dir) {
                Ok(r) => {
                    let stem = Path::new(&file).file_stem().map(|s| s.to_string_lossy().into_owned());
                    if stem.as_deref() != Some(r.name.as_str()) {
                        let at = src.find("name").map(|i| i..i + 4);
                        diags.push(Diagnostic::new(
                            &file,
                            &src,
                            at,
                            format!(
                                "component `{}` is defined in a file named `{}.toml`",
                                r.name,
                                stem.unwrap_or_default()
                            ),
                            Some(format!("name the file `{}.toml`", r.name)),
                        ));
                    } else if let Some(prev) = recipes.insert(r.name.clone(), r) {
                        diags.push(Diagnostic::new(
                            &file,
                            &src,
                            None,
                            format!("component `{}` is defined twice", prev.name),
                            None,
                        ));
                    }
                }
                Err(r) => {
                    diags.extend(r.diags);
                    rejected.push((file.clone(), r.depends));
                }
            }
        }
        // Smoke scripts are read now, so that a missing one is a load error, not a surprise later.
        for r in recipes.values_mut() {
            let Some(smoke) = r.smoke.as_mut() else { continue };
            let text = match &r.dir {
                Some(dir) => std::fs::read_to_string(dir.join(&smoke.path)).ok(),
                None if origin == "embedded" => EMBEDDED
                    .get_file(&smoke.path)
                    .map(|f| String::from_utf8_lossy(f.contents()).into_owned()),
                None => None,
            };
            match text {
                Some(t) => smoke.text = t,
                None => diags.push(Diagnostic::new(
                    &r.file,
                    &sources[&r.file],
                    smoke.span.clone(),
                    format!("smoke script `{}` cannot be read", smoke.path),
                    Some("name a Python file relative to the recipe file".into()),
                )),
            }
        }
        // Cross-file checks: dependencies and their features must exist.
        for r in recipes.values() {
            let src = &sources[&r.file];
            for dep in r.depends_all() {
                match recipes.get(&dep.name) {
                    None => diags.push(Diagnostic::new(
                        &r.file,
                        src,
                        dep.span.clone(),
                        format!("unknown dependency `{}`", dep.name),
                        Some(match closest(&dep.name, recipes.keys()) {
                            Some(c) => format!(
                                "did you mean `{c}`? known components: {}",
                                recipes.keys().cloned().collect::<Vec<_>>().join(", ")
                            ),
                            None => format!(
                                "known components: {}",
                                recipes.keys().cloned().collect::<Vec<_>>().join(", ")
                            ),
                        }),
                    )),
                    Some(target) => {
                        for f in &dep.features {
                            if !target.features.contains_key(f) {
                                diags.push(Diagnostic::new(
                                    &r.file,
                                    src,
                                    dep.span.clone(),
                                    format!("`{}` has no feature `{f}`", dep.name),
                                    Some(format!(
                                        "its features: {}",
                                        target.features.keys().cloned().collect::<Vec<_>>().join(", ")
                                    )),
                                ));
                            }
                        }
                    }
                }
            }
        }
        // Backends must name known components and features.
        for r in recipes.values() {
            for b in &r.backends {
                for (need, feats) in &b.needs {
                    let problem = match recipes.get(need) {
                        None => Some(format!("backend `{}` needs unknown component `{need}`", b.value)),
                        Some(t) => feats
                            .iter()
                            .find(|f| !t.features.contains_key(*f))
                            .map(|f| format!("backend `{}` needs `{need}[{f}]`, which has no such feature", b.value)),
                    };
                    if let Some(message) = problem {
                        diags.push(Diagnostic::new(
                            &r.file,
                            &sources[&r.file],
                            b.span.clone(),
                            message,
                            None,
                        ));
                    }
                }
            }
        }
        // Files with other problems still get their unknown dependency names reported.
        for (file, deps) in &rejected {
            for dep in deps
                .iter()
                .filter(|d| !stems.contains(&d.name) && !recipes.contains_key(&d.name))
            {
                diags.push(Diagnostic::new(
                    file,
                    &sources[file],
                    dep.span.clone(),
                    format!("unknown dependency `{}`", dep.name),
                    closest(&dep.name, stems.iter()).map(|c| format!("did you mean `{c}`?")),
                ));
            }
        }
        diags.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        if diags.is_empty() {
            for cycle in cycles(&recipes) {
                let first = &recipes[&cycle[0]];
                let edge = first.depends_all().find(|d| d.name == cycle[1 % cycle.len()]);
                let mut path = cycle.clone();
                path.push(cycle[0].clone());
                diags.push(Diagnostic::new(
                    &first.file,
                    &sources[&first.file],
                    edge.and_then(|d| d.span.clone()),
                    format!("dependency cycle: {}", path.join(" -> ")),
                    Some("a component cannot depend on itself, directly or through others".into()),
                ));
            }
        }
        if !diags.is_empty() {
            return Err(LoadError::Invalid(Diagnostics(diags)));
        }
        for r in recipes.values_mut() {
            let mut names: Vec<String> = r.depends_all().map(|d| d.name.clone()).collect();
            names.sort_unstable();
            names.dedup();
            r.depends_sorted = names;
        }
        Ok(RecipeSet { recipes, origin })
    }

    pub fn get(&self, name: &str) -> Option<&Recipe> {
        self.recipes.get(name)
    }

    /// A suggestion for a mistyped component name.
    pub fn closest(&self, name: &str) -> Option<String> {
        closest(name, self.recipes.keys())
    }

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
            // Every version's own pins too: the solver may pick any of them.
            for d in r
                .depends_with(&all)
                .chain(r.versions.iter().flat_map(|v| v.depends.iter()))
            {
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
    /// Every dependency, including those of all features.
    pub fn depends_all(&self) -> impl Iterator<Item = &super::model::Dependency> {
        self.depends
            .iter()
            .chain(self.features.values().flat_map(|f| f.depends.iter()))
            .chain(self.versions.iter().flat_map(|v| v.depends.iter()))
    }
}

/// Each cycle in the graph, as the list of components on it, starting at the smallest name.
fn cycles(recipes: &BTreeMap<String, Recipe>) -> Vec<Vec<String>> {
    let mut g: DiGraph<&str, ()> = DiGraph::new();
    let idx: BTreeMap<&str, NodeIndex> = recipes.keys().map(|k| (k.as_str(), g.add_node(k.as_str()))).collect();
    for r in recipes.values() {
        for d in r.depends_all() {
            if let Some(&to) = idx.get(d.name.as_str()) {
                g.update_edge(idx[r.name.as_str()], to, ());
            }
        }
    }
    let mut out = Vec::new();
    for scc in tarjan_scc(&g) {
        let self_loop = scc.len() == 1 && g.contains_edge(scc[0], scc[0]);
        if scc.len() < 2 && !self_loop {
            continue;
        }
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
        dfs(&g, &members, start, &mut path, &mut seen);
        out.push(path.into_iter().map(|n| g[n].to_string()).collect());
    }
    out.sort();
    out
}

/// The known name nearest to `name` by edit distance, if it is near enough to be a typo.
fn closest<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> Option<String> {
    known
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k.clone())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(files: &[(&str, &str)]) -> Result<RecipeSet, LoadError> {
        RecipeSet::from_files(
            files
                .iter()
                .map(|(n, s)| (format!("{n}.toml"), s.to_string(), None))
                .collect(),
            "test".into(),
        )
    }

    fn recipe(name: &str, deps: &str) -> String {
        format!("[package]\nname = \"{name}\"\nversion = \"1\"\n[source]\npath = \".\"\n[depends]\n{deps}\n")
    }

    #[test]
    fn names_the_cycle() {
        let e = set(&[
            ("a", &recipe("a", "b = \"*\"")),
            ("b", &recipe("b", "c = \"*\"")),
            ("c", &recipe("c", "a = \"*\"")),
        ])
        .unwrap_err();
        let LoadError::Invalid(d) = e else { panic!("{e}") };
        assert_eq!(d.0.len(), 1);
        assert_eq!(d.0[0].message, "dependency cycle: a -> b -> c -> a");
        assert_eq!((d.0[0].file.as_str(), d.0[0].line), ("a.toml", 7));
    }

    #[test]
    fn unknown_dependency_suggests_the_near_name() {
        let e = set(&[
            ("torch", &recipe("torch", "")),
            ("app", &recipe("app", "trorch = \">=2\"")),
        ])
        .unwrap_err();
        let LoadError::Invalid(d) = e else { panic!("{e}") };
        assert_eq!(d.0[0].message, "unknown dependency `trorch`");
        assert!(d.0[0].help.as_deref().unwrap().starts_with("did you mean `torch`?"));
    }

    #[test]
    fn closure_is_in_dependency_order() {
        let s = set(&[
            ("a", &recipe("a", "b = \"*\"\nc = \"*\"")),
            ("b", &recipe("b", "c = \"*\"")),
            ("c", &recipe("c", "")),
            ("d", &recipe("d", "")),
        ])
        .unwrap();
        let names: Vec<String> = s.closure(&[("a".into(), vec![])]).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["c", "b", "a"]);
    }

    #[test]
    fn embedded_recipes_load() {
        let s = RecipeSet::embedded().unwrap();
        assert!(s.recipes.len() >= 9);
    }
}
