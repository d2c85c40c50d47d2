//! The probe cache: an unchanged environment is re-checked without starting Python.
//!
//! An entry holds the facts of one probe (interpreter + the list of imports) and a stamp: the
//! modification time and size of everything whose change could change the answer — the
//! interpreter binary, the site-packages directories (a dist installed or removed changes them),
//! their `.pth` files, and for every distribution in scope its dist-info directory and each
//! `.py`, `.so` and `.pth` file its RECORD lists (an edited file of a package). Machine facts
//! are stamped by the environment variables and tool binaries they came from. A stamp that
//! differs in any entry means a full probe; `--refresh` forces one.
//!
//! It deliberately ignores files that are not in a RECORD (a module dropped into site-packages
//! by hand shows up only through the directory's mtime) and never caches a failed probe.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::binaries::Binaries;
use super::machine::MachineFacts;
use super::python::PythonFacts;
use super::smoke::SmokeResult;

/// (path, mtime in ns, size); mtime -1 for a path that does not exist.
type Stamp = Vec<(String, i64, u64)>;

#[derive(Serialize, Deserialize)]
struct PythonEntry {
    stamp: Stamp,
    #[serde(flatten)]
    probed: Probed,
}

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

/// The paths whose state the Python facts depend on.
fn python_paths(python: &Path, facts: &PythonFacts, dists: &[String]) -> Vec<PathBuf> {
    let mut paths = vec![python.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(python) {
        paths.push(real);
    }
    let mut sites: Vec<PathBuf> = facts.python.paths.values().flatten().map(PathBuf::from).collect();
    sites.sort();
    sites.dedup();
    for site in &sites {
        paths.push(site.clone());
        if let Ok(rd) = std::fs::read_dir(site) {
            let mut pth: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pth"))
                .collect();
            pth.sort();
            paths.extend(pth);
        }
    }
    for name in dists {
        let Some(d) = facts.dists.get(name) else { continue };
        let (Some(info), Some(loc)) = (&d.dist_info, &d.location) else {
            continue;
        };
        paths.push(PathBuf::from(info));
        let Ok(record) = std::fs::read_to_string(Path::new(info).join("RECORD")) else {
            continue;
        };
        for line in record.lines() {
            let rel = line.split(',').next().unwrap_or("").trim_matches('"');
            if rel.ends_with(".py") || rel.ends_with(".so") || rel.ends_with(".pth") || rel.contains(".so.") {
                paths.push(Path::new(loc).join(rel));
            }
        }
    }
    paths
}

fn read<T: for<'de> Deserialize<'de>>(file: &Path) -> Option<T> {
    let bytes = std::fs::read(file).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes atomically (temp file + rename) so a concurrent reader never sees half an entry.
fn write<T: Serialize>(file: &Path, value: &T) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".{}.{}",
        file.file_name().map(|f| f.to_string_lossy()).unwrap_or_default(),
        std::process::id()
    ));
    if let Ok(bytes) = serde_json::to_vec(value)
        && std::fs::write(&tmp, bytes).is_ok()
    {
        let _ = std::fs::rename(&tmp, file);
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

/// What `probe` found for (`python`, `imports`, the CUDA binaries of `dists`, the smoke tests
/// `smoke` names): from the cache when nothing it depends on changed, else from `probe` (whose
/// result is then stored).
pub fn python_facts<E>(
    cache: &Path,
    python: &Path,
    imports: &[String],
    dists: &[String],
    smoke: &str,
    refresh: bool,
    probe: impl FnOnce() -> Result<Probed, E>,
) -> Result<(Probed, CacheUse), E> {
    let file = cache.join("probe").join(format!(
        "py-{}.json",
        key(&[
            &python.display().to_string(),
            &imports.join(","),
            &dists.join(","),
            smoke
        ])
    ));
    if !refresh && let Some(entry) = read::<PythonEntry>(&file) {
        let now: Stamp = python_paths(python, &entry.probed.facts, dists)
            .iter()
            .map(|p| stat(p))
            .collect();
        if now == entry.stamp {
            return Ok((entry.probed, CacheUse::Hit));
        }
    }
    let probed = probe()?;
    let stamp = python_paths(python, &probed.facts, dists)
        .iter()
        .map(|p| stat(p))
        .collect();
    write(
        &file,
        &PythonEntry {
            stamp,
            probed: probed.clone(),
        },
    );
    Ok((probed, if refresh { CacheUse::Refresh } else { CacheUse::Miss }))
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

/// Machine facts, reused while the tools and variables they came from are unchanged. CPUs and
/// available memory are always read fresh.
pub fn machine_facts(cache: &Path, refresh: bool, probe: impl FnOnce() -> MachineFacts) -> MachineFacts {
    let file = cache.join("probe").join("machine.json");
    let stamp = machine_stamp();
    if !refresh
        && let Some(mut entry) = read::<MachineEntry>(&file)
        && entry.stamp == stamp
    {
        entry.facts.cpus = super::machine::cpus();
        entry.facts.memory_available = super::machine::memory_available();
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
