//! Stamps: digests of the modification time and size of what a probed fact depends on, so that
//! the probe cache can tell, by `stat` alone, whether the fact may have changed.
//!
//! Three kinds:
//! - the **listing** (interpreter and distributions): the interpreter binary, the site
//!   directories (a distribution installed or removed changes them), every `.pth` file in them
//!   and every distribution's dist-info directory and `kiln.json` (rewritten in place or not);
//! - a **component** (its imports): the interpreter, `LD_LIBRARY_PATH` and `LD_PRELOAD`, the
//!   `.pth` files no distribution owns (they run at every start-up), the dist-info directory of
//!   each distribution of the component and of the components it depends on and of each
//!   distribution those require (`Requires-Dist`, transitively: an upgrade of numpy reaches
//!   torch), every file its imports loaded (module sources and mapped shared objects, as the
//!   probe reported them; for a failed import, the files it ran through and the directories of
//!   the packages it looked in), and — when an import failed — the site directories, so that
//!   any install retries it;
//! - a distribution's **CUDA binaries**: its dist-info directory, `RECORD`, and each shared
//!   object the `RECORD` lists.
//!
//! A warm run reads no `RECORD`: the files are listed in the cache entries. It deliberately
//! ignores file contents (mtime + size, as make does), the standard library (it goes with the
//! interpreter), and files an import reads as data.

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
        let meta = std::fs::metadata(path)
            .ok()
            .map(|m| (m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.size()));
        self.file(&path.to_string_lossy(), meta);
    }

    /// Adds a file already looked at, under the name `rel`.
    fn file(&mut self, rel: &str, meta: Option<(i64, u64)>) {
        self.0.update([0u8]);
        self.0.update(rel.as_bytes());
        match meta {
            Some((mtime, size)) => {
                self.0.update(mtime.to_le_bytes());
                self.0.update(size.to_le_bytes());
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

/// The modification time and size of each distribution's dist-info directory, by name: one
/// `stat` each per run, shared by the listing's stamp and the components'.
pub struct Infos(HashMap<String, String>);

impl Infos {
    pub fn of(facts: &PythonFacts) -> Infos {
        Infos(
            facts
                .dists
                .iter()
                .map(|(name, d)| {
                    let of = |p: &Path| match std::fs::metadata(p) {
                        Ok(m) => format!("{} {}", m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.size()),
                        Err(_) => "-".to_string(),
                    };
                    // kiln.json too: a record rewritten in place leaves the directory's time as it was.
                    let stat = match &d.dist_info {
                        Some(info) => format!(
                            "{info} {} {}",
                            of(Path::new(info)),
                            of(&Path::new(info).join("kiln.json"))
                        ),
                        None => "no dist-info".to_string(),
                    };
                    (name.clone(), stat)
                })
                .collect(),
        )
    }

    fn get(&self, name: &str) -> &str {
        self.0.get(name).map_or("absent", String::as_str)
    }
}

/// The stamp of the interpreter's listing: see the module documentation.
pub fn listing(python: &Path, facts: &PythonFacts, infos: &Infos) -> String {
    let mut s = Stamp::new("listing");
    interpreter(&mut s, python);
    let sites = site_dirs(facts);
    for site in &sites {
        s.path(site);
    }
    for pth in pth_files(&sites) {
        s.path(&pth);
    }
    for name in facts.dists.keys() {
        s.text(name);
        s.text(infos.get(name));
    }
    s.finish()
}

fn record_paths(dist: &Dist) -> Option<(PathBuf, String)> {
    let (info, loc) = (dist.dist_info.as_ref()?, dist.location.as_ref()?);
    let record = std::fs::read_to_string(Path::new(info).join("RECORD")).ok()?;
    Some((PathBuf::from(loc), record))
}

/// The files that may hold device code (shared objects, objects, archives) `dist`'s `RECORD`
/// lists: what `probe::binaries::scan` reads.
pub fn shared_objects(dist: &Dist) -> Vec<String> {
    let Some((loc, record)) = record_paths(dist) else {
        return Vec::new();
    };
    crate::store::record::paths(&record)
        .into_iter()
        .filter(|rel| super::binaries::may_hold_cuda(rel))
        .map(|rel| loc.join(rel).display().to_string())
        .collect()
}

/// The stamp of `dist`'s CUDA binaries, `files` being its shared objects.
pub fn binaries(dist: &Dist, files: &[String], stats: &Stats) -> String {
    let mut s = Stamp::new("binaries");
    s.text(&dist.name);
    s.text(&dist.version);
    if let Some(info) = &dist.dist_info {
        s.path(Path::new(info));
        s.path(&Path::new(info).join("RECORD"));
    }
    for f in files {
        s.file(f, stats.get(f));
    }
    s.finish()
}

/// A file's modification time (ns) and size; `None` when it does not exist.
type FileState = Option<(i64, u64)>;

/// The modification time and size of many files, looked up once per run.
pub struct Stats(HashMap<String, FileState>);

impl Stats {
    /// Stats `paths` side by side on up to `threads` threads.
    pub fn of(paths: BTreeSet<&str>, threads: usize) -> Stats {
        let paths: Vec<&str> = paths.into_iter().collect();
        let chunk = paths.len().div_ceil(threads.max(1)).max(256);
        let parts: Vec<Vec<(String, FileState)>> = if paths.len() <= chunk {
            vec![paths.iter().map(|p| (p.to_string(), stat(p))).collect()]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = paths
                    .chunks(chunk)
                    .map(|c| s.spawn(move || c.iter().map(|p| (p.to_string(), stat(p))).collect()))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
            })
        };
        Stats(parts.into_iter().flatten().collect())
    }

    /// The file's state: from the run's lookups, else looked up now.
    fn get(&self, path: &str) -> FileState {
        match self.0.get(path) {
            Some(s) => *s,
            None => stat(path),
        }
    }
}

fn stat(path: &str) -> FileState {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.size()))
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
                    crate::store::record::paths(&record)
                        .into_iter()
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

/// What every component's stamp is computed from, once per run.
pub struct At<'a> {
    pub facts: &'a PythonFacts,
    pub graph: &'a Graph,
    pub infos: &'a Infos,
    /// The files the components' entries list, looked up once.
    pub stats: &'a Stats,
    /// The interpreter, the loader's variables and the `.pth` files no distribution owns
    /// ([`base`]).
    pub base: String,
}

/// The part every component's stamp shares: the interpreter, the variables that decide where
/// shared objects are found, and the unowned `.pth` files.
pub fn base(python: &Path, graph: &Graph) -> String {
    let mut s = Stamp::new("base");
    interpreter(&mut s, python);
    for var in ["LD_LIBRARY_PATH", "LD_PRELOAD"] {
        s.text(&format!("{var}={}", std::env::var(var).unwrap_or_default()));
    }
    for pth in &graph.unowned_pth {
        s.path(Path::new(pth));
    }
    s.finish()
}

/// The stamp of a component's imports: see the module documentation. `dists` are the
/// distributions of it and of what it depends on, `files` what its imports loaded.
pub fn component<'f>(at: &At, dists: &[String], files: impl Iterator<Item = &'f str>, failed: bool) -> String {
    let mut s = Stamp::new("component");
    s.text(&at.base);
    for d in dists.iter().cloned().chain(at.graph.required_by(dists)) {
        s.text(&d);
        s.text(at.infos.get(&d));
    }
    for f in files {
        s.file(f, at.stats.get(f));
    }
    if failed {
        for site in site_dirs(at.facts) {
            s.path(&site);
        }
    }
    s.finish()
}
