//! The checks that need every recipe at once: dependencies and the features they ask for exist,
//! backends need known components, files with other problems still get their unknown dependency
//! names reported, and nothing depends on itself. Each problem is a [`Diagnostic`] in the file it
//! is about.
//!
//! Lookups go through one hash index of the recipes by name, built once. It deliberately ignores
//! versions: whether the versions fit together is the resolver's question.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rustc_hash::FxHashMap;

use petgraph::graph::DiGraph;

use super::graph::{cycles, graph};
use crate::recipe::diag::Diagnostic;
use crate::recipe::model::{Dependency, Recipe};

/// Every recipe and every file's text, by name, and the dependency graph between them.
pub(super) struct World<'a> {
    recipes: &'a BTreeMap<String, Recipe>,
    /// The recipes in name order, and each one's position in that order by name.
    list: Vec<&'a Recipe>,
    index: FxHashMap<&'a str, usize>,
    sources: FxHashMap<&'a str, &'a str>,
    graph: DiGraph<&'a str, ()>,
    /// Per recipe (in name order): it names a component that is not in the set.
    unknown: Vec<bool>,
}

impl<'a> World<'a> {
    pub fn new(recipes: &'a BTreeMap<String, Recipe>, sources: FxHashMap<&'a str, &'a str>) -> Self {
        let list: Vec<&Recipe> = recipes.values().collect();
        let index: FxHashMap<&str, usize> = recipes.keys().enumerate().map(|(i, k)| (k.as_str(), i)).collect();
        let (graph, unknown) = graph(&list, &index);
        World {
            recipes,
            list,
            index,
            sources,
            graph,
            unknown,
        }
    }

    fn get(&self, name: &str) -> Option<&'a Recipe> {
        self.index.get(name).map(|&i| self.list[i])
    }

    fn at(
        &self,
        r: &Recipe,
        span: Option<std::ops::Range<usize>>,
        message: String,
        help: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::new(&r.file, self.sources[r.file.as_str()], span, message, help)
    }

    /// Dependencies must exist, with the features they ask for. Only recipes with an unknown name
    /// or a dependency that asks for features are looked at dependency by dependency.
    pub fn dependencies(&self, diags: &mut Vec<Diagnostic>) {
        for (i, r) in self.recipes.values().enumerate() {
            if !self.unknown[i] && r.depends_all().all(|d| d.features.is_empty()) {
                continue;
            }
            for dep in r.depends_all() {
                match self.get(&dep.name) {
                    None => diags.push(self.at(
                        r,
                        dep.span.clone(),
                        format!("unknown dependency `{}`", dep.name),
                        self.unknown_help(dep),
                    )),
                    Some(target) => {
                        for f in dep.features.iter().filter(|f| !target.features.contains_key(*f)) {
                            diags.push(self.at(
                                r,
                                dep.span.clone(),
                                format!("`{}` has no feature `{f}`", dep.name),
                                format!(
                                    "its features: {}",
                                    target.features.keys().cloned().collect::<Vec<_>>().join(", ")
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }

    fn unknown_help(&self, dep: &Dependency) -> String {
        let known = self.recipes.keys().cloned().collect::<Vec<_>>().join(", ");
        match closest(&dep.name, self.recipes.keys()) {
            Some(c) => format!("did you mean `{c}`? known components: {known}"),
            None => format!("known components: {known}"),
        }
    }

    /// Backends must name known components and features (in `needs` and `jit`); two facts of one
    /// value must not hold for the same version; an `[[auto]]` rule must name a value the recipe
    /// has a fact for.
    pub fn backends(&self, diags: &mut Vec<Diagnostic>) {
        for r in self.recipes.values() {
            for (i, b) in r.backends.iter().enumerate() {
                let jit = b.jit.iter().map(|(c, _)| (c.clone(), Vec::new()));
                for (need, feats) in b.needs.iter().cloned().chain(jit) {
                    let problem = match self.get(&need) {
                        None => Some(format!("backend `{}` needs unknown component `{need}`", b.value)),
                        Some(t) => feats
                            .iter()
                            .find(|f| !t.features.contains_key(*f))
                            .map(|f| format!("backend `{}` needs `{need}[{f}]`, which has no such feature", b.value)),
                    };
                    if let Some(message) = problem {
                        let fix = "name a component (and feature) that a recipe defines; `kiln recipes` lists them";
                        diags.push(self.at(r, b.span.clone(), message, fix));
                    }
                }
                let same = r.backends[..i]
                    .iter()
                    .find(|o| o.selector == b.selector && o.value == b.value && overlap(r, o, b));
                if let Some(o) = same {
                    let message = format!(
                        "a second [[backends]] for {} {} that holds for the same versions as the one at {}",
                        b.selector,
                        b.value,
                        self.line_of(r, o.span.clone())
                    );
                    let fix = "give each fact of one value its own `versions` range (e.g. `<0.5.20` and `>=0.5.20`)";
                    diags.push(self.at(r, b.span.clone(), message, fix));
                }
            }
            for a in &r.serving.auto {
                let known = r
                    .backends
                    .iter()
                    .any(|b| b.selector == a.selector && b.value == a.value);
                if !known && a.value != "auto" {
                    let message = format!(
                        "[[auto]] resolves {} to `{}`, which has no [[backends]] fact",
                        a.selector, a.value
                    );
                    let fix = format!(
                        "add a [[backends]] entry for {} = \"{}\", or fix the value",
                        a.selector, a.value
                    );
                    diags.push(self.at(r, a.span.clone(), message, fix));
                }
            }
        }
    }

    /// `line N` of a span in `r`'s file.
    fn line_of(&self, r: &Recipe, span: Option<std::ops::Range<usize>>) -> String {
        let src = self.sources[r.file.as_str()];
        let line = span.map_or(0, |s| src[..s.start.min(src.len())].lines().count() + 1);
        format!("line {line}")
    }

    /// Files with other problems still get their unknown dependency names reported; a name that
    /// is a file's stem counts as known (that file has problems of its own).
    pub fn rejected(
        &self,
        files: &[(String, String, Option<std::path::PathBuf>)],
        rejected: &[(usize, Vec<Dependency>)],
        diags: &mut Vec<Diagnostic>,
    ) {
        if rejected.is_empty() {
            return;
        }
        let stems: BTreeSet<String> = files
            .iter()
            .filter_map(|(f, _, _)| Path::new(f).file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        for (i, deps) in rejected {
            let (file, src, _) = &files[*i];
            for dep in deps
                .iter()
                .filter(|d| !stems.contains(&d.name) && !self.index.contains_key(d.name.as_str()))
            {
                diags.push(Diagnostic::new(
                    file,
                    src,
                    dep.span.clone(),
                    format!("unknown dependency `{}`", dep.name),
                    closest(&dep.name, stems.iter()).map_or_else(
                        || {
                            format!(
                                "add a recipe named `{}`, or depend on one that exists (`kiln recipes` lists them)",
                                dep.name
                            )
                        },
                        |c| format!("did you mean `{c}`?"),
                    ),
                ));
            }
        }
    }

    /// Each dependency cycle, reported at the edge that starts it.
    pub fn cycles(&self, diags: &mut Vec<Diagnostic>) {
        for cycle in cycles(&self.graph) {
            let first = self.list[self.index[cycle[0].as_str()]];
            let edge = first.depends_all().find(|d| d.name == cycle[1 % cycle.len()]);
            let mut path = cycle.clone();
            path.push(cycle[0].clone());
            diags.push(self.at(
                first,
                edge.and_then(|d| d.span.clone()),
                format!("dependency cycle: {}", path.join(" -> ")),
                "a component cannot depend on itself, directly or through others",
            ));
        }
    }
}

/// The known name nearest to `name` by edit distance, if it is near enough to be a typo.
pub(super) fn closest<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> Option<String> {
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

/// Whether two facts' version ranges share a version the recipe offers (unscoped facts hold for
/// every version).
fn overlap(r: &Recipe, a: &crate::recipe::serving::Backend, b: &crate::recipe::serving::Backend) -> bool {
    match (&a.serves.versions_spec, &b.serves.versions_spec) {
        (None, _) | (_, None) => true,
        (Some(x), Some(y)) => r
            .versions
            .iter()
            .any(|v| x.contains(&v.version) && y.contains(&v.version)),
    }
}
