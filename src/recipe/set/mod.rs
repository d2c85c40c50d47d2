//! A validated set of recipes: loading (embedded or from a directory), the checks that need all
//! files at once (file name = component name, unknown dependencies and features, cycles), and the
//! dependency graph queries the planner needs (closure of targets, execution order).
//!
//! Files are parsed in parallel ([`load`]); the checks that need every file run after, in one
//! thread, in a fixed order, so the problems come out the same way every time ([`check`]). It
//! deliberately ignores versions of dependencies beyond parsing them: choosing versions is the
//! resolver's job.

mod check;
mod graph;
mod load;

use std::collections::BTreeMap;
use std::path::Path;

use include_dir::{Dir, include_dir};
use rustc_hash::FxHashMap;

use super::diag::{Diagnostic, Diagnostics};
use super::model::Recipe;
use check::{World, closest};
use load::{File, Loaded, parse_all};

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
        let mut files: Vec<File> = EMBEDDED
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

    fn from_files(files: Vec<File>, origin: String) -> Result<RecipeSet, LoadError> {
        let mut diags = Vec::new();
        let mut named = Vec::with_capacity(files.len());
        let mut rejected = Vec::new();
        for (i, loaded) in parse_all(&files).into_iter().flatten().enumerate() {
            match loaded {
                Loaded::Named(name, r) => named.push((name, i, r)),
                Loaded::Misnamed(d) => diags.push(d),
                Loaded::Rejected(r) => {
                    diags.extend(r.diags);
                    rejected.push((i, r.depends));
                }
            }
        }
        let mut recipes = by_name(named, &files, &mut diags);
        let sources: FxHashMap<&str, &str> = files.iter().map(|(f, s, _)| (f.as_str(), s.as_str())).collect();
        read_smoke_scripts(&mut recipes, &sources, &origin, &mut diags);
        let world = World::new(&recipes, sources);
        world.dependencies(&mut diags);
        world.backends(&mut diags);
        world.rejected(&files, &rejected, &mut diags);
        diags.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        if diags.is_empty() {
            world.cycles(&mut diags);
        }
        if !diags.is_empty() {
            return Err(LoadError::Invalid(Diagnostics(diags)));
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
}

/// The recipes by name, built in one pass from the list sorted by name (the files usually come
/// in that order already), which is much cheaper than inserting ten thousand names one by one.
/// Where two files define one name, the later file's recipe is kept and a problem is reported there.
fn by_name(
    mut named: Vec<(String, usize, Recipe)>,
    files: &[File],
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<String, Recipe> {
    named.sort_by(|a, b| a.0.cmp(&b.0));
    for pair in named.windows(2) {
        if pair[0].0 == pair[1].0 {
            let (file, src, _) = &files[pair[1].1];
            diags.push(Diagnostic::new(
                file,
                src,
                None,
                format!("component `{}` is defined twice", pair[0].0),
                format!("keep one recipe named `{}`: rename or delete the other", pair[0].0),
            ));
        }
    }
    named.into_iter().map(|(name, _, r)| (name, r)).collect()
}

/// Smoke and JIT proof scripts are read now, so that a missing one is a load error, not a
/// surprise later.
fn read_smoke_scripts(
    recipes: &mut BTreeMap<String, Recipe>,
    sources: &FxHashMap<&str, &str>,
    origin: &str,
    diags: &mut Vec<Diagnostic>,
) {
    for r in recipes.values_mut() {
        let dir = r.dir.clone();
        let file = r.file.clone();
        let scripts = [
            r.smoke
                .as_mut()
                .map(|s| ("smoke", &s.path, &mut s.text, s.span.clone())),
            r.jit
                .as_mut()
                .map(|j| ("JIT proof", &j.path, &mut j.text, j.span.clone())),
            r.aot
                .as_mut()
                .map(|a| ("AOT", &a.script.path, &mut a.script.text, a.script.span.clone())),
        ];
        for (what, path, text, span) in scripts.into_iter().flatten() {
            let read = match &dir {
                Some(dir) => std::fs::read_to_string(dir.join(path.as_str())).ok(),
                None if origin == "embedded" => EMBEDDED
                    .get_file(path.as_str())
                    .map(|f| String::from_utf8_lossy(f.contents()).into_owned()),
                None => None,
            };
            match read {
                Some(t) => *text = t,
                None => diags.push(Diagnostic::new(
                    &file,
                    sources[file.as_str()],
                    span,
                    format!("{what} script `{path}` cannot be read"),
                    "name a Python file relative to the recipe file",
                )),
            }
        }
    }
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
    fn the_closure_as_installed_follows_only_the_installed_versions_pins() {
        // sglang 0.5.23 pins kernel packages that 0.5.11 does not; with 0.5.11 installed, doctor
        // judges 0.5.11's closure (on the H200 it had called sgl-flash-mla `missing`).
        let app = "[package]\nname = \"app\"\n[source]\npath = \".\"\n[depends]\nc = \"*\"\n\
                   [[versions]]\nversion = \"2\"\ndepends = { new = \"*\" }\n\
                   [[versions]]\nversion = \"1\"\ndepends = { old = \"*\" }\n";
        let s = set(&[
            ("app", app),
            ("c", &recipe("c", "")),
            ("new", &recipe("new", "")),
            ("old", &recipe("old", "")),
        ])
        .unwrap();
        let t = [("app".to_string(), vec![])];
        let names = |v: Vec<(String, Vec<String>)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        let at = |v: &'static str| move |r: &crate::recipe::Recipe| (r.name == "app").then(|| v.parse().unwrap());
        assert_eq!(names(s.closure(&t)), ["c", "new", "old", "app"]);
        assert_eq!(names(s.closure_as_installed(&t, &|_| None)), ["c", "new", "old", "app"]);
        assert_eq!(names(s.closure_as_installed(&t, &at("1"))), ["c", "old", "app"]);
        assert_eq!(names(s.closure_as_installed(&t, &at("2"))), ["c", "new", "app"]);
        // A version the recipe does not list: every version's pins, as for the solver.
        assert_eq!(names(s.closure_as_installed(&t, &at("3"))), ["c", "new", "old", "app"]);
    }

    #[test]
    fn a_large_set_is_loaded_in_parallel_and_reported_in_file_order() {
        // More files than one thread takes: blocks come back from several threads.
        let n = 3000;
        let texts = |broken: &[usize]| -> Vec<(String, String)> {
            (0..n)
                .map(|i| {
                    let dep = if i == 0 {
                        String::new()
                    } else {
                        format!("c{} = \">=1\"\n", i - 1)
                    };
                    let extra = if broken.contains(&i) {
                        "nope = \"*\"\n[bogus]\n"
                    } else {
                        ""
                    };
                    (
                        format!("c{i}.toml"),
                        format!("{}{extra}", recipe(&format!("c{i}"), &dep)),
                    )
                })
                .collect()
        };
        let s = RecipeSet::from_texts(texts(&[]), "t").unwrap();
        assert_eq!(s.recipes.len(), n);
        assert_eq!(s.recipes["c1234"].depends_sorted, ["c1233"]);
        let LoadError::Invalid(d) = RecipeSet::from_texts(texts(&[7, 1500, 2999]), "t").unwrap_err() else {
            panic!("not a diagnostic")
        };
        let seen: Vec<(&str, &str)> = d.0.iter().map(|d| (d.file.as_str(), d.message.as_str())).collect();
        assert_eq!(
            seen,
            [
                ("c1500.toml", "unknown dependency `nope`"),
                ("c1500.toml", "unknown key `bogus` at the top level"),
                // A file that depends on a rejected one is told its dependency is unknown.
                ("c1501.toml", "unknown dependency `c1500`"),
                ("c2999.toml", "unknown dependency `nope`"),
                ("c2999.toml", "unknown key `bogus` at the top level"),
                ("c7.toml", "unknown dependency `nope`"),
                ("c7.toml", "unknown key `bogus` at the top level"),
                ("c8.toml", "unknown dependency `c7`"),
            ]
        );
    }

    #[test]
    fn embedded_recipes_load() {
        let s = RecipeSet::embedded().unwrap();
        assert!(s.recipes.len() >= 9);
    }
}
