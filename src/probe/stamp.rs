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
                    let stat = match &d.dist_info {
                        Some(info) => match std::fs::metadata(info) {
                            Ok(m) => format!("{info} {} {}", m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.size()),
                            Err(_) => format!("{info} -"),
                        },
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
    let Some(d) = dist else {
        all.text("absent");
        bin.text("absent");
        return DistFiles {
            all: all.finish(),
            binaries: bin.finish(),
        };
    };
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
        // Relative to the directory the RECORD is relative to: the kernel walks only the
        // package's part of each path (most of the time of a warm run goes to these).
        let base = std::fs::File::open(&loc).ok();
        for rel in record.lines().map(record_path) {
            let so = is_so(rel);
            if so || rel.ends_with(".py") || rel.ends_with(".pth") {
                // One stat for both digests.
                let meta = match &base {
                    Some(dir) => stat_at(dir, rel),
                    None => std::fs::metadata(loc.join(rel))
                        .ok()
                        .map(|m| (m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.size())),
                };
                all.file(rel, meta);
                if so {
                    bin.file(rel, meta);
                }
            }
        }
    }
    DistFiles {
        all: all.finish(),
        binaries: bin.finish(),
    }
}

/// `fstatat(2)` of `rel` under the open directory `dir`: (mtime in ns, size).
fn stat_at(dir: &std::fs::File, rel: &str) -> Option<(i64, u64)> {
    use std::os::fd::AsRawFd;
    let c = std::ffi::CString::new(rel).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `c` is a NUL-terminated path, `st` a buffer the kernel fills on success only.
    let r = unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), 0) };
    if r != 0 {
        return None;
    }
    // SAFETY: fstatat returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    Some((st.st_mtime * 1_000_000_000 + st.st_mtime_nsec, st.st_size as u64))
}

/// The digests of the files of each of `names`, read side by side on up to `threads` threads
/// (the large distributions dominate: torch, vllm and flashinfer list thousands of files).
pub fn dist_files_all(names: &BTreeSet<String>, facts: &PythonFacts, threads: usize) -> HashMap<String, DistFiles> {
    let names: Vec<&String> = names.iter().collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = std::sync::Mutex::new(HashMap::new());
    let work = || {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(name) = names.get(i) else { break };
            let f = dist_files(name, facts.dists.get(*name));
            out.lock().unwrap().insert((*name).clone(), f);
        }
    };
    let threads = threads.clamp(1, names.len().max(1));
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(work);
            }
        });
    }
    out.into_inner().unwrap()
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

/// What every component's stamp is computed from, once per run.
pub struct At<'a> {
    pub facts: &'a PythonFacts,
    pub graph: &'a Graph,
    pub infos: &'a Infos,
    /// The digests of the files of every distribution components name ([`dist_files_all`]).
    pub files: &'a HashMap<String, DistFiles>,
    /// The interpreter and the `.pth` files no distribution owns ([`base`]).
    pub base: String,
}

/// The part every component's stamp shares: the interpreter and the unowned `.pth` files.
pub fn base(python: &Path, graph: &Graph) -> String {
    let mut s = Stamp::new("base");
    interpreter(&mut s, python);
    for pth in &graph.unowned_pth {
        s.path(Path::new(pth));
    }
    s.finish()
}

/// The stamp of a component's imports: see the module documentation.
pub fn component(at: &At, dists: &[String], failed: bool) -> String {
    let At {
        facts,
        graph,
        infos,
        files,
        base,
    } = at;
    let mut s = Stamp::new("component");
    s.text(base);
    for d in dists {
        s.text(d);
        s.text(files.get(d).map_or("?", |f| f.all.as_str()));
    }
    for d in graph.required_by(dists) {
        s.text(&d);
        s.text(infos.get(&d));
    }
    if failed {
        for site in site_dirs(facts) {
            s.path(&site);
        }
    }
    s.finish()
}
