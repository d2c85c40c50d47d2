//! The wheel cache: every wheel that was built and verified is kept under a key made of what
//! decides the binary — component, version, features, the source identity (a git commit, an
//! sdist's sha256, or the contents of a local tree), the recipe's build section as written, the
//! target archs, the CUDA toolkit and host compiler versions, the interpreter's version and
//! platform, and the fingerprint of each ABI dependency (torch's version, CUDA, commit, C++11 ABI
//! and arch list). Not paths, not mtimes, not the job count: nodes with different core counts and
//! directories share entries. Point several nodes at one cache directory (a shared filesystem)
//! and only the first compiles.
//!
//! Entries are written under a temporary name and renamed into place, so a reader sees a whole
//! entry or none. A key is only made when every ABI fingerprint is known; otherwise the wheel is
//! built, not guessed.
//!
//! A wheel that built but failed verification for a reason outside its own files (a missing
//! dependency, a killed verification; see `blame`) is kept too, marked *built but unverified*
//! (`unverified.json` beside it, saying why): a later run installs it and verifies it again
//! instead of compiling, and only a verification that passes clears the mark. Such an entry is
//! never reported as verified.
//!
//! Each entry records its wheel's sha256 (`wheel.sha256`) and the inputs of its key
//! (`key.json`), and is bound to what it is for: a wheel is kept only when it is a wheel of the
//! step's distribution and version whose files match its RECORD, and each time it is taken
//! ([`find`]) the record must be there and match the wheel hashed again (and the lock's
//! sha256, with a lock), `key.json` must be the inputs of the key being looked up, and the
//! wheel's name, version, METADATA and RECORD are checked again (`crate::store::wheel`). A
//! wheel that fails any of it is never installed and never trusted on first use: its entry is
//! moved aside under `<cache>/quarantine/` and the error says why and where (an entry without
//! its record included).
//!
//! It deliberately ignores eviction (entries stay until the directory is deleted) and
//! environment variables outside the recipe's `[build] env` (a user's `CFLAGS` can change a
//! binary without changing the key).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use crate::store::wheel::Expected;

/// Everything that decides the wheel a build produces.
#[derive(Debug, Serialize)]
pub struct KeyInputs<'a> {
    pub component: &'a str,
    pub version: &'a str,
    pub features: &'a [String],
    /// `git:<commit>`, `sha256:<sdist hash>`, `tree:<hash of a local directory>`.
    pub source: &'a str,
    /// The recipe's `[build]` section, templates unrendered.
    pub build: serde_json::Value,
    pub archs: Vec<crate::arch::Arch>,
    pub cuda: Option<String>,
    pub host_compiler: Option<&'a str>,
    pub python: &'a str,
    pub implementation: &'a str,
    pub platform: Option<String>,
    /// Fingerprint of each ABI dependency, by component.
    pub abi: &'a BTreeMap<String, String>,
}

/// [`KeyInputs`] as read back from `key.json`: the same fields in the same order, so that it
/// serializes to the same text.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Recorded {
    component: serde_json::Value,
    version: serde_json::Value,
    features: serde_json::Value,
    source: serde_json::Value,
    build: serde_json::Value,
    archs: serde_json::Value,
    cuda: serde_json::Value,
    host_compiler: serde_json::Value,
    python: serde_json::Value,
    implementation: serde_json::Value,
    platform: serde_json::Value,
    abi: serde_json::Value,
}

/// The cache key: a hex sha256 of the inputs, with a format prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelKey(pub String);

impl WheelKey {
    pub fn of(inputs: &KeyInputs) -> WheelKey {
        let text = serde_json::to_string(inputs).unwrap_or_default();
        let mut h = Sha256::new();
        h.update(b"kiln-wheel-cache/1\0");
        h.update(text.as_bytes());
        WheelKey(hex::encode(h.finalize()))
    }

    /// The key of inputs as an entry's `key.json` records them (`None`: not of that shape): the
    /// same text [`WheelKey::of`] hashed, so an entry's name can be checked against its inputs.
    pub fn of_recorded(inputs: &serde_json::Value) -> Option<WheelKey> {
        let recorded: Recorded = serde_json::from_value(inputs.clone()).ok()?;
        let text = serde_json::to_string(&recorded).ok()?;
        let mut h = Sha256::new();
        h.update(b"kiln-wheel-cache/1\0");
        h.update(text.as_bytes());
        Some(WheelKey(hex::encode(h.finalize())))
    }

    fn dir(&self, cache: &Path) -> PathBuf {
        cache.join("wheels").join(&self.0[..2]).join(&self.0)
    }
}

/// The mark of an entry whose wheel built but never passed verification.
const UNVERIFIED: &str = "unverified.json";

/// Why a cached wheel is built but unverified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unverified {
    /// The failure outside the wheel that stopped its verification.
    pub why: String,
    /// When it was kept, in seconds since the epoch.
    pub since: u64,
}

/// The record of an entry's wheel: its sha256, in hex.
pub(super) const SHA256: &str = "wheel.sha256";

/// The inputs of an entry's key, beside its wheel.
const KEY_JSON: &str = "key.json";

/// A cached wheel, and whether it is still unverified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    pub wheel: PathBuf,
    pub unverified: Option<Unverified>,
    /// The wheel's sha256, as hashed now (and equal to its entry's record).
    pub sha256: String,
}

/// What a wheel taken from the cache must be: the distribution and version of the step that
/// takes it, the inputs of its key, and (with a lock) the sha256 the lock names.
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    pub dist: &'a str,
    pub version: &'a str,
    pub inputs: &'a serde_json::Value,
    pub locked: Option<&'a str>,
}

/// Why a cached wheel was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    #[error(
        "has no record of its sha256 ({SHA256}): kiln keeps one with every wheel, so an entry without it is not trusted"
    )]
    NoRecord,
    #[error("is not the one {whose} names (sha256 {want}, the file has {got})")]
    Differs { whose: String, want: String, got: String },
    #[error("is not kept for this build: its {KEY_JSON} is missing or describes another build")]
    OtherKey,
    #[error("is not the wheel of {dist} {version} its key names: {mismatch}")]
    Contents {
        dist: String,
        version: String,
        mismatch: crate::store::wheel::Mismatch,
    },
}

/// A cached wheel that is not the one its entry is for: refused, and its entry moved aside.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cached wheel {} {why}; it was not installed, and its cache entry was moved aside to {}",
    wheel.display(),
    moved.display()
)]
pub struct Refused {
    pub wheel: PathBuf,
    pub why: Box<Why>,
    /// Where the entry is now.
    pub moved: PathBuf,
}

/// The cached wheel for `key`, if there is one (verified or not).
pub fn lookup(cache: &Path, key: &WheelKey) -> Option<PathBuf> {
    std::fs::read_dir(key.dir(cache))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
}

/// The cached wheel for `key` with its mark: [`lookup`], then every binding of the entry
/// checked before anything trusts it: its sha256 record is there and the wheel hashes to it
/// (and to the lock's, where a lock names one), its `key.json` is `want.inputs`, and the wheel
/// is a wheel of `want.dist` at `want.version` whose files match its RECORD
/// ([`crate::store::wheel`]). A wheel that fails any of it is refused and its entry
/// quarantined: never installed, never trusted on first use.
pub fn find(cache: &Path, key: &WheelKey, want: &Want) -> Result<Option<Cached>, Refused> {
    let Some(wheel) = lookup(cache, key) else {
        return Ok(None);
    };
    let dir = key.dir(cache);
    let refuse = |why| Err(quarantine(cache, &dir, wheel.clone(), why));
    let record = crate::state::read(&dir.join(SHA256), 1024, "")
        .ok()
        .flatten()
        .map(|r| String::from_utf8_lossy(&r).trim().to_string());
    let Some(record) = record else {
        return refuse(Why::NoRecord);
    };
    let got = super::sha256_file(&wheel).unwrap_or_else(|e| format!("none: {e}"));
    if record != got {
        return refuse(Why::Differs {
            whose: "its cache entry".into(),
            want: record,
            got,
        });
    }
    if let Some(locked) = want.locked.filter(|l| *l != got) {
        return refuse(Why::Differs {
            whose: "the lock".into(),
            want: locked.to_string(),
            got,
        });
    }
    let recorded: Option<serde_json::Value> =
        crate::state::read_json(&dir.join(KEY_JSON), crate::state::RECORD_LIMIT, "")
            .ok()
            .flatten();
    if recorded.as_ref() != Some(want.inputs) {
        return refuse(Why::OtherKey);
    }
    if let Err(mismatch) = crate::store::wheel::check(&wheel, expected(want)) {
        return refuse(Why::Contents {
            dist: want.dist.to_string(),
            version: want.version.to_string(),
            mismatch,
        });
    }
    Ok(Some(Cached {
        wheel,
        unverified: mark_of(&dir),
        sha256: got,
    }))
}

fn expected<'a>(want: &Want<'a>) -> crate::store::wheel::Expected<'a> {
    crate::store::wheel::Expected {
        dist: want.dist,
        version: want.version,
    }
}

/// Moves the entry `dir` aside to `<cache>/quarantine/wheel-<key>-<stamp>` (or, if that
/// fails, removes it: a wheel that is not what it claims never stays where it is taken from).
fn quarantine(cache: &Path, dir: &Path, wheel: PathBuf, why: Why) -> Refused {
    let moved = quarantine_path(
        cache,
        &format!("wheel-{}", dir.file_name().unwrap_or_default().to_string_lossy()),
    );
    let done = moved
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::rename(dir, &moved));
    if done.is_err() {
        let _ = std::fs::remove_dir_all(dir);
    }
    Refused {
        wheel,
        why: Box::new(why),
        moved,
    }
}

/// A fresh place under `<cache>/quarantine/` for something named `name`.
pub fn quarantine_path(cache: &Path, name: &str) -> PathBuf {
    let stamp = super::stamp();
    (0..)
        .map(|n| cache.join("quarantine").join(format!("{name}-{stamp}-{n}")))
        .find(|p| !p.exists())
        .unwrap_or_default()
}

fn mark_of(entry: &Path) -> Option<Unverified> {
    let text = match crate::state::read(&entry.join(UNVERIFIED), crate::state::RECORD_LIMIT, "") {
        Ok(Some(t)) => t,
        Ok(None) => return None,
        // A mark that is not a small regular file still marks the wheel unverified.
        Err(e) => {
            return Some(Unverified {
                why: format!("its mark cannot be read: {e}"),
                since: 0,
            });
        }
    };
    // A mark that cannot be read still marks the wheel unverified.
    Some(serde_json::from_slice(&text).unwrap_or_else(|e| Unverified {
        why: format!("its mark cannot be read: {e}"),
        since: 0,
    }))
}

/// Keeps a verified `wheel` under `key`, with the inputs beside it (`key.json`) for whoever
/// wonders why two entries differ; an unverified entry already there is verified now (its mark
/// goes). Returns where the wheel now is.
pub fn store(
    cache: &Path,
    key: &WheelKey,
    inputs: &serde_json::Value,
    wheel: &Path,
    is: Expected,
) -> std::io::Result<PathBuf> {
    if let Some(existing) = lookup(cache, key) {
        match std::fs::remove_file(key.dir(cache).join(UNVERIFIED)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => return Ok(existing),
        }
    }
    put(cache, key, inputs, wheel, is, None)
}

/// Keeps a wheel that built but failed verification for a reason outside it (`why`), marked
/// unverified. An entry already there (verified or not) stays as it is. Returns where the
/// wheel now is.
pub fn store_unverified(
    cache: &Path,
    key: &WheelKey,
    inputs: &serde_json::Value,
    wheel: &Path,
    is: Expected,
    why: &str,
) -> std::io::Result<PathBuf> {
    if let Some(existing) = lookup(cache, key) {
        return Ok(existing);
    }
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mark = Unverified {
        why: why.to_string(),
        since,
    };
    put(cache, key, inputs, wheel, is, Some(&mark))
}

/// Removes an unverified entry (its wheel failed in its own files after all); a verified entry
/// is left alone.
pub fn forget_unverified(cache: &Path, key: &WheelKey) -> std::io::Result<()> {
    let dir = key.dir(cache);
    if !dir.join(UNVERIFIED).exists() {
        return Ok(());
    }
    std::fs::remove_dir_all(dir)
}

/// Every unverified entry in the cache: its wheel and why it is unverified.
pub fn unverified(cache: &Path) -> Vec<(PathBuf, Unverified)> {
    let shards = std::fs::read_dir(cache.join("wheels")).into_iter().flatten().flatten();
    let mut out: Vec<(PathBuf, Unverified)> = shards
        .flat_map(|s| std::fs::read_dir(s.path()).into_iter().flatten().flatten())
        .filter_map(|e| {
            let mark = mark_of(&e.path())?;
            let wheel = std::fs::read_dir(e.path())
                .ok()?
                .filter_map(|f| f.ok().map(|f| f.path()))
                .find(|p| p.extension().is_some_and(|x| x == "whl"))?;
            Some((wheel, mark))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Writes the entry under a temporary name (with its mark, if any), synced, and renames it
/// into place. A wheel that is not a wheel of `is` (its name, version, METADATA, RECORD) is
/// never kept.
fn put(
    cache: &Path,
    key: &WheelKey,
    inputs: &serde_json::Value,
    wheel: &Path,
    is: Expected,
    mark: Option<&Unverified>,
) -> std::io::Result<PathBuf> {
    let dir = key.dir(cache);
    let parent = dir.parent().unwrap_or(cache);
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".{}.{}.tmp", key.0, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let name = wheel.file_name().unwrap_or_default();
    let written = (|| {
        std::fs::copy(wheel, tmp.join(name))?;
        // The copy is what is checked and hashed: what is kept is what was checked.
        crate::store::wheel::check(&tmp.join(name), is)
            .map_err(|m| std::io::Error::other(format!("it is not the wheel of {} {}: {m}", is.dist, is.version)))?;
        std::fs::File::open(tmp.join(name))?.sync_all()?;
        let sha = super::sha256_file(&tmp.join(name))?;
        use crate::store::atomic::{Sync, write};
        write(&tmp.join(SHA256), sha.as_bytes(), Sync::Durable)?;
        let text = serde_json::to_string_pretty(inputs).unwrap_or_default();
        write(&tmp.join(KEY_JSON), text.as_bytes(), Sync::Durable)?;
        if let Some(m) = mark {
            write(
                &tmp.join(UNVERIFIED),
                &serde_json::to_vec_pretty(m).unwrap_or_default(),
                Sync::Durable,
            )?;
        }
        Ok::<(), std::io::Error>(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => {
            let _ = crate::store::atomic::sync_dir(parent);
            Ok(dir.join(name))
        }
        // Another node stored the same entry first: theirs is as good as ours.
        Err(_) if lookup(cache, key).is_some() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(lookup(cache, key).unwrap_or_else(|| dir.join(name)))
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// A hash of a directory's contents: every file's path (relative, sorted) and bytes, symlinks by
/// their target; `.git` and `__pycache__` are skipped.
pub fn tree_hash(dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    for rel in files {
        let path = dir.join(&rel);
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0u8]);
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            h.update(b"->");
            h.update(std::fs::read_link(&path)?.to_string_lossy().as_bytes());
        } else {
            let mut f = std::fs::File::open(&path)?;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
        }
        h.update([0u8]);
    }
    Ok(hex::encode(h.finalize()))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        if name == ".git" || name == "__pycache__" {
            continue;
        }
        let t = e.file_type()?;
        if t.is_dir() {
            collect(root, &e.path(), out)?;
        } else {
            out.push(e.path().strip_prefix(root).unwrap_or(&e.path()).to_path_buf());
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "wheels_tests.rs"]
mod tests;
