//! The probe cache: an unchanged environment is re-checked without starting Python, and a new
//! set of targets costs only what was never probed.
//!
//! Facts are stored part by part, each with the stamp ([`super::stamp`]) of what could change
//! it, under `<cache>/probe/py-<interpreter key>/`:
//! - `dists.json`: the interpreter and its distribution list (with the `Requires-Dist` graph and
//!   the `.pth` files no distribution owns, worked out once per listing);
//! - `imports-<component>-<key>.json`: one component's imports (key: the import list), the files
//!   they loaded, torch's ABI facts when it imports torch or depends on it, and its smoke test
//!   (by script and archs);
//! - `binaries-<dist>.json`: the CUDA binaries of one distribution and the shared objects read.
//!
//! A stamp that differs re-probes that part alone; `--refresh` re-probes every part in scope.
//! Machine facts are stamped by the environment variables and tool binaries they came from.
//! It deliberately ignores how the parts are probed (`probe::gather`) and never caches a failed
//! probe (a probe that gave no answer; an import that failed is an answer).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::binaries::Binaries;
use super::machine::MachineFacts;
use super::python::{ImportResult, PythonFacts, TorchFacts};
use super::smoke::SmokeResult;
use super::stamp::Graph;

/// (path, mtime in ns, size); mtime -1 for a path that does not exist.
type Stamp = Vec<(String, i64, u64)>;

/// What one probe of an interpreter found: its facts, the CUDA binaries of the distributions in
/// scope, and the smoke tests that ran (by component).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Probed {
    pub facts: PythonFacts,
    pub binaries: BTreeMap<String, Binaries>,
    #[serde(default)]
    pub smoke: BTreeMap<String, SmokeResult>,
}

#[derive(Serialize, Deserialize)]
struct MachineEntry {
    stamp: Stamp,
    facts: MachineFacts,
}

/// The interpreter and its distributions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ListingEntry {
    pub stamp: String,
    /// `imports` empty, `torch` none.
    pub facts: PythonFacts,
    pub graph: Graph,
}

/// One component's imports, in the order tried.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ImportsEntry {
    pub stamp: String,
    pub imports: BTreeMap<String, ImportResult>,
    pub torch: Option<TorchFacts>,
    /// How long the interpreter took, to start the slowest first next time.
    pub seconds: f64,
    /// The files its imports loaded, one per line (what its stamp covers).
    #[serde(default)]
    pub files: String,
    #[serde(default)]
    pub smoke: Option<SmokeEntry>,
}

impl ImportsEntry {
    pub fn failed(&self) -> bool {
        self.imports.values().any(|i| !i.ok)
    }
}

/// A smoke test's result, for one script and set of archs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SmokeEntry {
    pub key: String,
    pub result: SmokeResult,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct BinariesEntry {
    pub stamp: String,
    /// The shared objects read, one per line.
    pub files: String,
    pub binaries: Binaries,
}

fn stat(path: &Path) -> (String, i64, u64) {
    let p = path.display().to_string();
    match std::fs::metadata(path) {
        Ok(m) => (p, m.mtime() * 1_000_000_000 + m.mtime_nsec(), m.size()),
        Err(_) => (p, -1, 0),
    }
}

fn key(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    h.update(env!("CARGO_PKG_VERSION"));
    h.update(super::python::SCRIPT);
    for p in parts {
        h.update([0u8]);
        h.update(p.as_bytes());
    }
    hex::encode(&h.finalize()[..12])
}

/// Where the parts of one interpreter's facts are kept.
pub(super) struct Entries {
    dir: PathBuf,
}

impl Entries {
    pub fn new(cache: &Path, python: &Path) -> Entries {
        Entries {
            dir: cache
                .join("probe")
                .join(format!("py-{}", key(&[&python.display().to_string()]))),
        }
    }

    fn listing_file(&self) -> PathBuf {
        self.dir.join("dists.json")
    }

    fn imports_file(&self, component: &str, imports: &[String]) -> PathBuf {
        self.dir.join(format!(
            "imports-{}-{}.json",
            safe(component),
            key(&[&imports.join("\0")])
        ))
    }

    fn binaries_file(&self, dist: &str) -> PathBuf {
        self.dir.join(format!("binaries-{}.json", safe(dist)))
    }

    pub fn listing(&self) -> Option<ListingEntry> {
        read(&self.listing_file())
    }

    pub fn put_listing(&self, e: &ListingEntry) {
        write(&self.listing_file(), e)
    }

    pub fn imports(&self, component: &str, imports: &[String]) -> Option<ImportsEntry> {
        read(&self.imports_file(component, imports))
    }

    pub fn put_imports(&self, component: &str, imports: &[String], e: &ImportsEntry) {
        write(&self.imports_file(component, imports), e)
    }

    pub fn binaries(&self, dist: &str) -> Option<BinariesEntry> {
        read(&self.binaries_file(dist))
    }

    pub fn put_binaries(&self, dist: &str, e: &BinariesEntry) {
        write(&self.binaries_file(dist), e)
    }
}

/// A name as a file-name part: recipe and distribution names are already safe; anything else
/// becomes `_`.
fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// An entry, read defensively ([`crate::state`]): a fifo, a huge file or a wrong shape is a
/// miss, probed and written again.
fn read<T: for<'de> Deserialize<'de>>(file: &Path) -> Option<T> {
    crate::state::cached_json(file)
}

/// Writes atomically (temp file + rename) so a concurrent reader never sees half an entry.
fn write<T: Serialize>(file: &Path, value: &T) {
    if let Ok(bytes) = serde_json::to_vec(value) {
        let _ = crate::store::atomic::write(file, &bytes, crate::store::atomic::Sync::Cache);
    }
}

/// How a lookup went, for `--json` and the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheUse {
    Hit,
    Miss,
    Refresh,
}

/// Where each part of a probe's facts came from: `hit` (the cache), `miss` (probed now, never
/// probed or changed since) or `refresh` (probed now, `--refresh`).
#[derive(Debug, Clone, Serialize)]
pub struct Sources {
    /// The interpreter and its distribution list.
    pub distributions: CacheUse,
    /// Each component's imports, by component.
    pub imports: BTreeMap<String, CacheUse>,
    /// The CUDA binaries, by distribution.
    pub binaries: BTreeMap<String, CacheUse>,
    /// Smoke tests, by component.
    pub smoke: BTreeMap<String, CacheUse>,
    /// Python interpreters started for this probe (crash and hang recoveries not counted).
    pub interpreters: usize,
    /// How many could run side by side.
    pub side_by_side: usize,
}

impl Sources {
    /// `hit` when every part came from the cache, else `refresh` or `miss`.
    pub fn overall(&self) -> CacheUse {
        let parts = std::iter::once(self.distributions)
            .chain(self.imports.values().copied())
            .chain(self.binaries.values().copied())
            .chain(self.smoke.values().copied());
        let mut out = CacheUse::Hit;
        for p in parts {
            match p {
                CacheUse::Refresh => return CacheUse::Refresh,
                CacheUse::Miss => out = CacheUse::Miss,
                CacheUse::Hit => {}
            }
        }
        out
    }
}

const MACHINE_ENV: &[&str] = &[
    "KILN_GPU_ARCH",
    "KILN_CPUS",
    "KILN_DRIVER_VERSION",
    "KILN_DRIVER_CUDA",
    "KILN_CUDA_VERSION",
    "CUDA_HOME",
    "PATH",
    "CXX",
];

fn machine_stamp() -> Stamp {
    let mut s: Stamp = MACHINE_ENV
        .iter()
        .map(|k| (format!("${k}={}", std::env::var(k).unwrap_or_default()), 0, 0))
        .collect();
    let mut tools: Vec<PathBuf> = ["nvidia-smi", "nvcc", "g++"]
        .iter()
        .filter_map(|t| which::which(t).ok())
        .collect();
    tools.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    tools.push(PathBuf::from("/proc/driver/nvidia/version"));
    if let Ok(h) = std::env::var("CUDA_HOME") {
        tools.push(Path::new(&h).join("bin/nvcc"));
    }
    s.extend(tools.iter().map(|p| stat(p)));
    if let Ok(v) = std::fs::read_to_string("/proc/driver/nvidia/version") {
        s.push((v, 0, 0));
    }
    s
}

/// Machine facts, reused while the tools and variables they came from are unchanged. CPUs,
/// available memory and what the toolkit's home holds (a few file names, which change without
/// nvcc changing) are always read fresh.
pub fn machine_facts(cache: &Path, refresh: bool, probe: impl FnOnce() -> MachineFacts) -> MachineFacts {
    let file = cache.join("probe").join("machine.json");
    let stamp = machine_stamp();
    if !refresh
        && let Some(mut entry) = read::<MachineEntry>(&file)
        && entry.stamp == stamp
    {
        entry.facts.cpus = super::machine::cpus();
        entry.facts.memory_available = super::machine::memory_available();
        if let Some(tk) = entry.facts.cuda_toolkit.as_mut()
            && let Some(layout) = tk.layout.as_mut()
        {
            *layout = super::toolkit_layout::read(&layout.home);
        }
        return entry.facts;
    }
    let facts = probe();
    write(
        &file,
        &MachineEntry {
            stamp,
            facts: facts.clone(),
        },
    );
    facts
}
