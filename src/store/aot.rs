//! The cache of modules compiled ahead of time (`install --aot`): `<cache>/aot/<key>/` holds
//! `manifest.json` (component, version, archs, toolkit, host compiler, and each module with the
//! path in site-packages where the component looks for it) and `files/<that path>`. The key is
//! a hash of what decides the binaries (the caller computes it); an entry is written under a
//! temporary name and renamed, so a reader never sees half of one. Everything an entry needs is
//! inside its directory, so a bundle can carry it as it is ([`entries_for`] finds them).
//!
//! It deliberately ignores how the modules were compiled and whether they suit an arch.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One entry's description.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The key without the toolkit: a node with no toolkit (a serving node) loads the modules
    /// but cannot say which toolkit it would compile with, so it looks entries up by this.
    #[serde(default)]
    pub base: String,
    pub component: String,
    pub version: String,
    /// The target archs, as kiln spells them (`12.0`).
    pub archs: Vec<String>,
    pub toolkit: Option<String>,
    pub host_compiler: Option<String>,
    pub modules: Vec<CachedModule>,
}

/// One module in an entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CachedModule {
    /// The name the recipe's `[aot] modules` uses.
    pub module: String,
    /// The component's own name for it.
    pub name: String,
    /// Where it goes, relative to site-packages.
    pub install: String,
}

impl Manifest {
    /// The first module whose `install` path would leave site-packages (absolute, `..`, or
    /// empty parts): such a manifest is never used, since its files are copied to that path.
    pub fn leaves_site_packages(&self) -> Option<&str> {
        self.modules.iter().map(|m| m.install.as_str()).find(|p| !inside(p))
    }

    /// The key an entry of this manifest is filed under.
    pub fn key(&self) -> String {
        key_of(&self.base, self.toolkit.as_deref())
    }
}

/// Whether `path` is a relative path of plain names (no root, `..`, `.` or empty part).
fn inside(path: &str) -> bool {
    !path.is_empty() && path.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
}

/// A hash of `parts` (each ended by a NUL), as entry keys and their `base` are made.
pub fn hash(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..16])
}

/// The key of an entry compiled from inputs `base` with toolkit `toolkit` (none: `""`).
pub fn key_of(base: &str, toolkit: Option<&str>) -> String {
    hash(&[base, toolkit.unwrap_or("")])
}

/// The directory of entry `key`.
pub fn entry_dir(cache: &Path, key: &str) -> PathBuf {
    cache.join("aot").join(key)
}

/// The file of `m` in the entry at `dir`.
pub fn file_of(dir: &Path, m: &CachedModule) -> PathBuf {
    dir.join("files").join(&m.install)
}

/// The entry `key`, when it is complete (its manifest and every file it names are there).
pub fn lookup(cache: &Path, key: &str) -> Option<Manifest> {
    let dir = entry_dir(cache, key);
    let m: Manifest = crate::state::cached_json(&dir.join("manifest.json"))?;
    if m.leaves_site_packages().is_some() {
        return None;
    }
    m.modules.iter().all(|x| file_of(&dir, x).is_file()).then_some(m)
}

/// The newest complete entry whose key without the toolkit is `base`, with its key.
pub fn lookup_base(cache: &Path, base: &str) -> Option<(String, Manifest)> {
    let mut found: Vec<(std::time::SystemTime, String, Manifest)> = std::fs::read_dir(cache.join("aot"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let key = e.file_name().to_string_lossy().into_owned();
            let m = lookup(cache, &key).filter(|m| m.base == base)?;
            let t = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            Some((t, key, m))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    found.pop().map(|(_, k, m)| (k, m))
}

/// Stores `files` (each module with the file the compile wrote) as entry `key`.
pub fn store(cache: &Path, key: &str, manifest: &Manifest, files: &[PathBuf]) -> std::io::Result<PathBuf> {
    let dir = entry_dir(cache, key);
    let tmp = cache.join("aot").join(format!(".{key}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    let write = || -> std::io::Result<()> {
        for (m, f) in manifest.modules.iter().zip(files) {
            if !inside(&m.install) {
                return Err(std::io::Error::other(format!("`{}` leaves site-packages", m.install)));
            }
            let to = file_of(&tmp, m);
            std::fs::create_dir_all(to.parent().unwrap_or(&tmp))?;
            std::fs::copy(f, &to).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
        }
        let text = serde_json::to_vec_pretty(manifest).map_err(std::io::Error::other)?;
        std::fs::write(tmp.join("manifest.json"), text)?;
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir)
    };
    let done = write();
    if done.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    done.map(|()| dir)
}

/// The entries (paths relative to the cache, `aot/<key>`) for `component` at `version`: what a
/// bundle of a lock that names that version carries.
pub fn entries_for(cache: &Path, component: &str, version: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(cache.join("aot"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let key = e.file_name().to_string_lossy().into_owned();
            let m = lookup(cache, &key)?;
            (m.component == component && m.version == version).then(|| format!("aot/{key}"))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(install: &str) -> Manifest {
        Manifest {
            base: "b1".into(),
            component: "flashinfer".into(),
            version: "0.7.4".into(),
            archs: vec!["12.0".into()],
            toolkit: Some("13.0.88".into()),
            host_compiler: None,
            modules: vec![CachedModule {
                module: "silu_and_mul".into(),
                name: "silu_and_mul".into(),
                install: install.into(),
            }],
        }
    }

    #[test]
    fn an_entry_is_whole_or_absent_and_found_by_component_and_version() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        let so = cache.join("built.so");
        std::fs::write(&so, "elf").unwrap();
        let m = manifest("flashinfer/data/aot/silu_and_mul/silu_and_mul.so");
        assert_eq!(lookup(cache, "k1"), None);
        let at = store(cache, "k1", &m, std::slice::from_ref(&so)).unwrap();
        assert_eq!(lookup(cache, "k1"), Some(m.clone()));
        assert_eq!(std::fs::read_to_string(file_of(&at, &m.modules[0])).unwrap(), "elf");
        assert_eq!(entries_for(cache, "flashinfer", "0.7.4"), ["aot/k1"]);
        assert_eq!(lookup_base(cache, "b1"), Some(("k1".to_string(), m.clone())));
        assert_eq!(lookup_base(cache, "b2"), None);
        assert!(entries_for(cache, "flashinfer", "0.7.2").is_empty());
        // A file gone from an entry: the entry is not used.
        std::fs::remove_file(file_of(&at, &m.modules[0])).unwrap();
        assert_eq!(lookup(cache, "k1"), None);
        // A module may not be installed outside site-packages.
        assert!(store(cache, "k2", &manifest("../evil.so"), std::slice::from_ref(&so)).is_err());
        assert!(!entry_dir(cache, "k2").exists());
    }

    /// An entry written by other means (a bundle, an older kiln) whose module would be copied
    /// outside site-packages is never found, whatever its files: `install` is joined to
    /// site-packages and written there.
    #[test]
    fn an_entry_that_would_install_outside_site_packages_is_never_found() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        for (i, bad) in ["../../escape.so", "/etc/escape.so", "a//b.so", "./a.so", ""]
            .iter()
            .enumerate()
        {
            let m = manifest(bad);
            assert_eq!(m.leaves_site_packages(), Some(*bad));
            let key = format!("bad{i}");
            let at = entry_dir(cache, &key);
            std::fs::create_dir_all(at.join("files")).unwrap();
            std::fs::write(at.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
            std::fs::write(at.join("files/escape.so"), "elf").unwrap();
            assert_eq!(lookup(cache, &key), None, "{bad}");
        }
        let good = manifest("flashinfer/data/aot/m/m.so");
        assert_eq!(good.leaves_site_packages(), None);
        assert_eq!(good.key(), key_of("b1", Some("13.0.88")));
        assert_ne!(good.key(), key_of("b1", None), "the toolkit is part of the key");
    }
}
