//! Stamps: digests of the modification time and size of the files a probed fact depends on, so
//! that the probe cache can tell, by `stat` alone, whether the fact may have changed.
//!
//! Three kinds, from coarse to fine:
//! - the **listing** (interpreter and distributions): the interpreter binary, the site
//!   directories (a distribution installed or removed changes them), every `.pth` file in them
//!   and every distribution's dist-info directory (kiln writing `kiln.json` changes it);
//! - a **distribution's files**: its dist-info directory, its `RECORD`, and each `.py`, `.so` and
//!   `.pth` file the `RECORD` lists (with a second digest over the `.so` files alone, for the CUDA
//!   binaries);
//! - a **component** (its imports): the interpreter, the `.pth` files no distribution owns
//!   (they run at every start-up), the files of each distribution of the component and of the
//!   components it depends on, the dist-info directory of each distribution those require
//!   (`Requires-Dist`, transitively: an upgrade of numpy reaches torch), and — when an import
//!   failed — the site directories, so that any install retries it.
//!
//! It deliberately ignores file contents (mtime + size, as make does), files no `RECORD` lists
//! (a module dropped in by hand shows up only through the site directory, and only for failed
//! imports) and in-place edits of the files of `Requires-Dist` dependencies that no recipe names.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::python::{Dist, PythonFacts, normalize};

/// A running digest of paths with their modification time and size.
pub struct Stamp(Sha256);

impl Stamp {
    pub fn new(kind: &str) -> Stamp {
        let mut h = Sha256::new();
        h.update(kind.as_bytes());
        Stamp(h)
    }

    /// Adds `path` as it is now (a path that does not exist counts as such).
    pub fn path(&mut self, path: &Path) {
        let meta = std::fs::metadata(path).ok();
        self.file(&path.to_string_lossy(), meta.as_ref());
    }

    /// Adds a file already looked at, under the name `rel`.
    fn file(&mut self, rel: &str, meta: Option<&std::fs::Metadata>) {
        self.0.update([0u8]);
        self.0.update(rel.as_bytes());
        match meta {
            Some(m) => {
                self.0
                    .update((m.mtime() * 1_000_000_000 + m.mtime_nsec()).to_le_bytes());
                self.0.update(m.size().to_le_bytes());
            }
            None => self.0.update(b"-"),
        }
    }

    /// Adds a label or a digest.
    pub fn text(&mut self, s: &str) {
        self.0.update([1u8]);
        self.0.update(s.as_bytes());
    }

    pub fn finish(self) -> String {
        hex::encode(&self.0.finalize()[..16])
    }
}

/// The site directories (and the scripts directory) of the interpreter.
pub fn site_dirs(facts: &PythonFacts) -> Vec<PathBuf> {
    let mut sites: Vec<PathBuf> = facts.python.paths.values().flatten().map(PathBuf::from).collect();
    sites.sort();
    sites.dedup();
    sites
}

/// The `.pth` files of the site directories, sorted.
pub fn pth_files(sites: &[PathBuf]) -> Vec<PathBuf> {
    let mut pth: Vec<PathBuf> = sites
        .iter()
        .filter_map(|s| std::fs::read_dir(s).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pth"))
        .collect();
    pth.sort();
    pth
}

fn interpreter(s: &mut Stamp, python: &Path) {
    s.path(python);
    if let Ok(real) = std::fs::canonicalize(python) {
        s.path(&real);
    }
}

/// The stamp of the interpreter's listing: see the module documentation.
pub fn listing(python: &Path, facts: &PythonFacts) -> String {
    let mut s = Stamp::new("listing");
    interpreter(&mut s, python);
    let sites = site_dirs(facts);
    for site in &sites {
        s.path(site);
    }
    for pth in pth_files(&sites) {
        s.path(&pth);
    }
    for d in facts.dists.values() {
        match &d.dist_info {
            Some(info) => s.path(Path::new(info)),
            None => s.text(&d.name),
        }
    }
    s.finish()
}

/// One distribution's files, as digests.
#[derive(Debug, Clone)]
pub struct DistFiles {
    /// The dist-info directory, `RECORD` and every `.py`, `.so` and `.pth` file it lists.
    pub all: String,
    /// The dist-info directory, `RECORD` and the shared objects alone.
    pub binaries: String,
}

fn record_paths(dist: &Dist) -> Option<(PathBuf, String)> {
    let (info, loc) = (dist.dist_info.as_ref()?, dist.location.as_ref()?);
    let record = std::fs::read_to_string(Path::new(info).join("RECORD")).ok()?;
    Some((PathBuf::from(loc), record))
}

/// The relative path of one `RECORD` line (a CSV row whose first field may be quoted).
fn record_path(line: &str) -> &str {
    line.split(',').next().unwrap_or("").trim_matches('"')
}

fn is_so(rel: &str) -> bool {
    rel.ends_with(".so") || rel.contains(".so.")
}

/// The digests of `name`'s files (`None`: not installed).
pub fn dist_files(name: &str, dist: Option<&Dist>) -> DistFiles {
    let mut all = Stamp::new("dist");
    let mut bin = Stamp::new("binaries");
    all.text(name);
    bin.text(name);
    if let Some(d) = dist {
        all.text(&d.version);
        bin.text(&d.version);
        if let Some(info) = &d.dist_info {
            let info = Path::new(info);
            for s in [&mut all, &mut bin] {
                s.path(info);
                s.path(&info.join("RECORD"));
            }
        }
        if let Some((loc, record)) = record_paths(d) {
            for rel in record.lines().map(record_path) {
                let so = is_so(rel);
                if so || rel.ends_with(".py") || rel.ends_with(".pth") {
                    let p = loc.join(rel);
                    // One stat for both digests.
                    let meta = std::fs::metadata(&p).ok();
                    all.file(rel, meta.as_ref());
                    if so {
                        bin.file(rel, meta.as_ref());
                    }
                }
            }
        }
    } else {
        all.text("absent");
        bin.text("absent");
    }
    DistFiles {
        all: all.finish(),
        binaries: bin.finish(),
    }
}

/// What the listing knows that stamps need, worked out once per listing: each distribution's
/// `Requires-Dist` names, and the `.pth` files no distribution's `RECORD` lists.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Graph {
    pub requires: BTreeMap<String, Vec<String>>,
    pub unowned_pth: Vec<String>,
}

impl Graph {
    pub fn of(facts: &PythonFacts) -> Graph {
        let mut requires = BTreeMap::new();
        let mut owned: BTreeSet<PathBuf> = BTreeSet::new();
        for (name, d) in &facts.dists {
            // Every requirement counts, whatever its markers: a superset only re-probes more.
            let names: BTreeSet<String> = d
                .requires
                .iter()
                .filter_map(|r| pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(r).ok())
                .map(|r| normalize(r.name.as_ref()))
                .collect();
            requires.insert(name.clone(), names.into_iter().collect());
            if let Some((loc, record)) = record_paths(d) {
                owned.extend(
                    record
                        .lines()
                        .map(record_path)
                        .filter(|r| r.ends_with(".pth") && !r.contains('/'))
                        .map(|r| loc.join(r)),
                );
            }
        }
        let unowned_pth = pth_files(&site_dirs(facts))
            .into_iter()
            .filter(|p| !owned.contains(p))
            .map(|p| p.display().to_string())
            .collect();
        Graph { requires, unowned_pth }
    }

    /// The distributions `roots` require, transitively, without `roots` themselves.
    pub fn required_by(&self, roots: &[String]) -> BTreeSet<String> {
        let mut seen: BTreeSet<String> = roots.iter().cloned().collect();
        let mut stack: Vec<&str> = roots.iter().map(String::as_str).collect();
        let mut out = BTreeSet::new();
        while let Some(n) = stack.pop() {
            for dep in self.requires.get(n).into_iter().flatten() {
                if seen.insert(dep.clone()) {
                    out.insert(dep.clone());
                    stack.push(dep);
                }
            }
        }
        out
    }
}

/// The stamp of a component's imports: see the module documentation. `files` gives the digest
/// of one distribution's files (memoized by the caller: components share distributions).
pub fn component(
    python: &Path,
    facts: &PythonFacts,
    graph: &Graph,
    dists: &[String],
    failed: bool,
    mut files: impl FnMut(&str) -> String,
) -> String {
    let mut s = Stamp::new("component");
    interpreter(&mut s, python);
    for pth in &graph.unowned_pth {
        s.path(Path::new(pth));
    }
    for d in dists {
        s.text(d);
        s.text(&files(d));
    }
    for d in graph.required_by(dists) {
        s.text(&d);
        match facts.dists.get(&d).and_then(|x| x.dist_info.as_deref()) {
            Some(info) => s.path(Path::new(info)),
            None => s.text("absent"),
        }
    }
    if failed {
        for site in site_dirs(facts) {
            s.path(&site);
        }
    }
    s.finish()
}
