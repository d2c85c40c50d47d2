//! The wheel cache: every wheel that was built *and verified* is kept under a key made of what
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
//! It deliberately ignores eviction (entries stay until the directory is deleted) and
//! environment variables outside the recipe's `[build] env` (a user's `CFLAGS` can change a
//! binary without changing the key).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;
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

/// The cached wheel for `key`, if there is one.
pub fn lookup(cache: &Path, key: &WheelKey) -> Option<PathBuf> {
    std::fs::read_dir(key.dir(cache))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
}

/// Keeps `wheel` under `key`, with the inputs beside it (`key.json`) for whoever wonders why
/// two entries differ. Returns where the wheel now is.
pub fn store(cache: &Path, key: &WheelKey, inputs: &serde_json::Value, wheel: &Path) -> std::io::Result<PathBuf> {
    let dir = key.dir(cache);
    if let Some(existing) = lookup(cache, key) {
        return Ok(existing);
    }
    let parent = dir.parent().unwrap_or(cache);
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".{}.{}.tmp", key.0, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let name = wheel.file_name().unwrap_or_default();
    std::fs::copy(wheel, tmp.join(name))?;
    std::fs::write(
        tmp.join("key.json"),
        serde_json::to_string_pretty(inputs).unwrap_or_default(),
    )?;
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
