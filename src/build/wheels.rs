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
//! Each entry records its wheel's sha256 (`wheel.sha256`), and a wheel is hashed again each
//! time it is taken: a wheel that is not the one its entry recorded (or that a lock names, see
//! [`refuse`]) is never installed; its entry is moved aside under `<cache>/quarantine/` and the
//! error names where. An entry written before records existed gets its record at first use.
//!
//! It deliberately ignores eviction (entries stay until the directory is deleted) and
//! environment variables outside the recipe's `[build] env` (a user's `CFLAGS` can change a
//! binary without changing the key).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// A cached wheel, and whether it is still unverified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    pub wheel: PathBuf,
    pub unverified: Option<Unverified>,
    /// The wheel's sha256, as hashed now (and equal to its entry's record).
    pub sha256: String,
}

/// A cached wheel that is not the one that names it: refused, and its entry moved aside.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cached wheel {} is not the one {whose} names (sha256 {want}, the file has {got}); it was not installed, and its cache entry was moved aside to {}",
    wheel.display(),
    moved.display()
)]
pub struct Refused {
    pub wheel: PathBuf,
    /// What names it: its cache entry's record, or a lock.
    pub whose: String,
    pub want: String,
    pub got: String,
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

/// The cached wheel for `key` with its mark: [`lookup`] plus whether it is unverified, the
/// wheel hashed again and checked against its entry's record. A wheel that differs (or cannot
/// be read as a file) is refused and its entry quarantined.
pub fn find(cache: &Path, key: &WheelKey) -> Result<Option<Cached>, Refused> {
    let Some(wheel) = lookup(cache, key) else {
        return Ok(None);
    };
    let dir = key.dir(cache);
    let record = std::fs::read_to_string(dir.join(SHA256)).ok();
    let got = super::source::sha256_file(&wheel).unwrap_or_else(|e| format!("none: {e}"));
    let want = match record {
        Some(r) => r.trim().to_string(),
        // Kept by a kiln that wrote no records: recorded now, as it is.
        None => {
            let _ = std::fs::write(dir.join(SHA256), &got);
            got.clone()
        }
    };
    if want != got {
        return Err(quarantine(cache, &dir, wheel, "its cache entry", want, got));
    }
    Ok(Some(Cached {
        wheel,
        unverified: mark_of(&dir),
        sha256: got,
    }))
}

/// Refuses the cached wheel `found` (under `key`) because `whose` (a lock) names another
/// sha256, `want`: its entry is quarantined.
pub fn refuse(cache: &Path, key: &WheelKey, found: &Cached, whose: &str, want: &str) -> Refused {
    quarantine(
        cache,
        &key.dir(cache),
        found.wheel.clone(),
        whose,
        want.to_string(),
        found.sha256.clone(),
    )
}

/// Moves the entry `dir` aside to `<cache>/quarantine/wheel-<key>-<stamp>` (or, if that
/// fails, removes it: a wheel that is not what it claims never stays where it is taken from).
fn quarantine(cache: &Path, dir: &Path, wheel: PathBuf, whose: &str, want: String, got: String) -> Refused {
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
        whose: whose.to_string(),
        want,
        got,
        moved,
    }
}

/// A fresh place under `<cache>/quarantine/` for something named `name`.
pub fn quarantine_path(cache: &Path, name: &str) -> PathBuf {
    let stamp = super::run_stamp();
    (0..)
        .map(|n| cache.join("quarantine").join(format!("{name}-{stamp}-{n}")))
        .find(|p| !p.exists())
        .unwrap_or_default()
}

fn mark_of(entry: &Path) -> Option<Unverified> {
    let text = std::fs::read(entry.join(UNVERIFIED)).ok()?;
    // A mark that cannot be read still marks the wheel unverified.
    Some(serde_json::from_slice(&text).unwrap_or_else(|e| Unverified {
        why: format!("its mark cannot be read: {e}"),
        since: 0,
    }))
}

/// Keeps a verified `wheel` under `key`, with the inputs beside it (`key.json`) for whoever
/// wonders why two entries differ; an unverified entry already there is verified now (its mark
/// goes). Returns where the wheel now is.
pub fn store(cache: &Path, key: &WheelKey, inputs: &serde_json::Value, wheel: &Path) -> std::io::Result<PathBuf> {
    if let Some(existing) = lookup(cache, key) {
        match std::fs::remove_file(key.dir(cache).join(UNVERIFIED)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => return Ok(existing),
        }
    }
    put(cache, key, inputs, wheel, None)
}

/// Keeps a wheel that built but failed verification for a reason outside it (`why`), marked
/// unverified. An entry already there (verified or not) stays as it is. Returns where the
/// wheel now is.
pub fn store_unverified(
    cache: &Path,
    key: &WheelKey,
    inputs: &serde_json::Value,
    wheel: &Path,
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
    put(cache, key, inputs, wheel, Some(&mark))
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

/// Writes the entry under a temporary name (with its mark, if any) and renames it into place.
fn put(
    cache: &Path,
    key: &WheelKey,
    inputs: &serde_json::Value,
    wheel: &Path,
    mark: Option<&Unverified>,
) -> std::io::Result<PathBuf> {
    let dir = key.dir(cache);
    let parent = dir.parent().unwrap_or(cache);
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".{}.{}.tmp", key.0, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let name = wheel.file_name().unwrap_or_default();
    std::fs::copy(wheel, tmp.join(name))?;
    let sha = super::source::sha256_file(&tmp.join(name)).map_err(std::io::Error::other)?;
    std::fs::write(tmp.join(SHA256), sha)?;
    std::fs::write(
        tmp.join("key.json"),
        serde_json::to_string_pretty(inputs).unwrap_or_default(),
    )?;
    if let Some(m) = mark {
        std::fs::write(tmp.join(UNVERIFIED), serde_json::to_vec_pretty(m).unwrap_or_default())?;
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir.join(name)),
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
mod tests {
    use super::*;

    fn inputs<'a>(abi: &'a BTreeMap<String, String>, source: &'a str) -> KeyInputs<'a> {
        KeyInputs {
            component: "flashinfer",
            version: "0.7.4",
            features: &[],
            source,
            build: serde_json::json!({"env": {"FLASHINFER_CUDA_ARCH_LIST": "{arch.flashinfer}"}}),
            archs: vec![crate::arch::Arch { major: 12, minor: 0 }],
            cuda: Some("13.0".into()),
            host_compiler: Some("13.3.0"),
            python: "3.12.3",
            implementation: "cpython",
            platform: Some("linux x86_64".into()),
            abi,
        }
    }

    #[test]
    fn the_key_changes_with_what_decides_the_binary_and_a_stored_wheel_is_found() {
        let torch: BTreeMap<String, String> = [("torch".to_string(), "2.14.1 cu13.0".to_string())].into();
        let other_torch: BTreeMap<String, String> = [("torch".to_string(), "2.11.0 cu13.0".to_string())].into();
        let a = WheelKey::of(&inputs(&torch, "sha256:aa"));
        assert_eq!(a, WheelKey::of(&inputs(&torch, "sha256:aa")));
        assert_ne!(a, WheelKey::of(&inputs(&other_torch, "sha256:aa")));
        assert_ne!(a, WheelKey::of(&inputs(&torch, "sha256:bb")));

        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("flashinfer-0.7.4-cp312-cp312-linux_x86_64.whl");
        std::fs::write(&wheel, b"not really a zip").unwrap();
        let cache = tmp.path().join("cache");
        assert_eq!(lookup(&cache, &a), None);
        let kept = store(
            &cache,
            &a,
            &serde_json::to_value(inputs(&torch, "sha256:aa")).unwrap(),
            &wheel,
        )
        .unwrap();
        assert_eq!(lookup(&cache, &a), Some(kept.clone()));
        assert_eq!(std::fs::read(&kept).unwrap(), b"not really a zip");
        // Storing again keeps the first entry.
        assert_eq!(
            store(
                &cache,
                &a,
                &serde_json::to_value(inputs(&torch, "sha256:aa")).unwrap(),
                &wheel
            )
            .unwrap(),
            kept
        );
    }

    #[test]
    fn an_unverified_wheel_is_marked_until_a_verification_passes_or_it_is_forgotten() {
        let torch = BTreeMap::new();
        let key = WheelKey::of(&inputs(&torch, "sha256:cc"));
        let json = serde_json::to_value(inputs(&torch, "sha256:cc")).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("x-1.0-py3-none-any.whl");
        std::fs::write(&wheel, b"zip").unwrap();
        let cache = tmp.path().join("cache");
        let why = "No module named 'six'";
        let kept = store_unverified(&cache, &key, &json, &wheel, why).unwrap();
        let found = find(&cache, &key).unwrap().unwrap();
        assert_eq!(found.wheel, kept);
        assert_eq!(found.unverified.as_ref().map(|u| u.why.as_str()), Some(why));
        assert_eq!(unverified(&cache), [(kept.clone(), found.unverified.unwrap())]);
        // Verified now: the same entry, without its mark.
        assert_eq!(store(&cache, &key, &json, &wheel).unwrap(), kept);
        assert_eq!(find(&cache, &key).unwrap().unwrap().unverified, None);
        assert!(unverified(&cache).is_empty());
        // A verified entry is neither marked again nor forgotten.
        store_unverified(&cache, &key, &json, &wheel, why).unwrap();
        forget_unverified(&cache, &key).unwrap();
        assert_eq!(find(&cache, &key).unwrap().unwrap().unverified, None);
        // An unverified one is forgotten.
        let other = WheelKey::of(&inputs(&torch, "sha256:dd"));
        store_unverified(&cache, &other, &json, &wheel, why).unwrap();
        forget_unverified(&cache, &other).unwrap();
        assert_eq!(find(&cache, &other), Ok(None));
    }

    #[test]
    fn a_wheel_that_is_not_the_one_its_entry_recorded_is_refused_and_moved_aside() {
        let torch = BTreeMap::new();
        let key = WheelKey::of(&inputs(&torch, "sha256:ee"));
        let json = serde_json::to_value(inputs(&torch, "sha256:ee")).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("x-1.0-py3-none-any.whl");
        std::fs::write(&wheel, b"the wheel that was verified").unwrap();
        let cache = tmp.path().join("cache");
        let kept = store(&cache, &key, &json, &wheel).unwrap();
        let found = find(&cache, &key).unwrap().unwrap();
        assert_eq!(found.sha256, crate::build::source::sha256_file(&wheel).unwrap());

        // A lock that names another wheel: refused, moved aside.
        let r = refuse(&cache, &key, &found, "kiln.lock", &"0".repeat(64));
        assert!(r.moved.starts_with(cache.join("quarantine")), "{r}");
        assert!(r.moved.join("x-1.0-py3-none-any.whl").is_file(), "{r}");
        assert_eq!(lookup(&cache, &key), None);

        // The wheel changed under its record: refused at use, moved aside, never found again.
        store(&cache, &key, &json, &wheel).unwrap();
        std::fs::write(&kept, b"something else").unwrap();
        let r = find(&cache, &key).unwrap_err();
        assert_eq!(r.whose, "its cache entry");
        assert!(r.to_string().contains("was moved aside to"), "{r}");
        assert_eq!(
            std::fs::read(r.moved.join("x-1.0-py3-none-any.whl")).unwrap(),
            b"something else"
        );
        assert_eq!(find(&cache, &key), Ok(None));

        // A wheel replaced by a fifo is refused without hanging.
        store(&cache, &key, &json, &wheel).unwrap();
        std::fs::remove_file(&kept).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&kept).status().unwrap();
        assert!(made.success());
        assert!(find(&cache, &key).is_err());
    }

    #[test]
    fn a_tree_hash_follows_contents_not_mtimes() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir_all(d.join("pkg/__pycache__")).unwrap();
        std::fs::write(d.join("pkg/a.py"), "x = 1\n").unwrap();
        std::fs::write(d.join("pkg/__pycache__/a.pyc"), "junk").unwrap();
        let first = tree_hash(d).unwrap();
        std::fs::write(d.join("pkg/__pycache__/a.pyc"), "other junk").unwrap();
        std::fs::write(d.join("pkg/a.py"), "x = 1\n").unwrap();
        assert_eq!(tree_hash(d).unwrap(), first);
        std::fs::write(d.join("pkg/a.py"), "x = 2\n").unwrap();
        assert_ne!(tree_hash(d).unwrap(), first);
    }
}
