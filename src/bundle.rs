//! Bundles: one archive that provisions an air-gapped node. It holds a lockfile and, from kiln's
//! cache, what reproducing it needs: the sdists and git mirrors of the locked sources and the
//! verified wheels the lock names (found by their sha256). `kiln install --locked --bundle FILE`
//! unpacks it into the cache and installs offline; a wheel whose cache key matches on the target
//! (same Python, archs, toolkit, torch) is installed as is, anything else is built from the
//! bundled source.
//!
//! The archive is a plain tar written and read by the `tar` program. It deliberately leaves out
//! what kiln does not cache: `path` sources (the directory must exist on the target), packages
//! installed from an index (`index:`; the target needs them in uv's cache or an index), and build
//! requirements of a rebuild.

use std::path::{Path, PathBuf};

use crate::build::source::{mirror_dir, sha256_file};
use crate::cache_dir::entries_at;
use crate::lock::Lock;
use crate::process::Cmd;
use crate::recipe::{RecipeSet, Source};

/// The lockfile's name inside a bundle.
pub const LOCK_IN_BUNDLE: &str = "kiln.lock";

/// What goes into a bundle: cache directories (relative to the cache) and what stays out.
#[derive(Debug, Default, serde::Serialize)]
pub struct Contents {
    /// Cache-relative directories: `sources/<sha>`, `git/<hash>`, `wheels/<xx>/<key>`.
    pub entries: Vec<String>,
    /// One line per component part that is not in the bundle, and why.
    pub left_out: Vec<String>,
}

/// What `lock` needs from `cache`, and (second) the locked sources kiln built from but no
/// longer holds: a bundle without them would not reproduce the lock. What kiln never caches is
/// listed as left out.
pub fn contents(lock: &Lock, set: &RecipeSet, cache: &Path) -> (Contents, Vec<String>) {
    let mut c = Contents::default();
    let mut missing = Vec::new();
    let wheels = wheel_entries(cache);
    for comp in &lock.components {
        let (kind, value) = comp.source.split_once(':').unwrap_or((comp.source.as_str(), ""));
        match kind {
            "sha256" => {
                let dir = Path::new("sources").join(value);
                if cache.join(&dir).is_dir() {
                    c.entries.push(dir.display().to_string());
                } else {
                    missing.push(format!(
                        "{}: its sdist ({}) is not in the cache",
                        comp.name, comp.source
                    ));
                }
            }
            "git" => {
                let url = set
                    .get(&comp.name)
                    .and_then(|r| r.source_of(Some(comp.public_version())))
                    .and_then(|s| match s {
                        Source::Git { url, .. } => Some(url.clone()),
                        _ => None,
                    });
                match url.map(|u| mirror_dir(&u, cache)) {
                    Some(m) if m.join("HEAD").is_file() => c
                        .entries
                        .push(m.strip_prefix(cache).unwrap_or(&m).display().to_string()),
                    _ => missing.push(format!(
                        "{}: the git mirror holding {} is not in the cache",
                        comp.name, comp.source
                    )),
                }
            }
            "path" => c.left_out.push(format!(
                "{}: a local directory ({value}) is not bundled; it must exist on the target",
                comp.name
            )),
            _ => c.left_out.push(format!(
                "{}: `{}` is not bundled; the target needs it installed, in uv's cache or from an index",
                comp.name, comp.source
            )),
        }
        if let Some(sha) = &comp.wheel_sha256 {
            match wheels.iter().find(|(_, s)| s == sha) {
                Some((dir, _)) => c.entries.push(dir.clone()),
                None => c.left_out.push(format!(
                    "{}: its wheel (sha256 {}) is not in the wheel cache; the target builds it from source",
                    comp.name,
                    sha.chars().take(12).collect::<String>()
                )),
            }
        }
    }
    c.entries.sort();
    c.entries.dedup();
    (c, missing)
}

/// Every wheel cache entry (cache-relative directory) with its wheel's sha256.
fn wheel_entries(cache: &Path) -> Vec<(String, String)> {
    entries_at(&cache.join("wheels"), 2)
        .into_iter()
        .filter_map(|dir| {
            let wheel = std::fs::read_dir(&dir)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "whl"))?;
            let sha = sha256_file(&wheel).ok()?;
            Some((dir.strip_prefix(cache).unwrap_or(&dir).display().to_string(), sha))
        })
        .collect()
}

/// Writes the bundle: the lockfile's text as `kiln.lock`, then the cache entries.
pub fn write(out: &Path, lock_text: &str, contents: &Contents, cache: &Path, log: &Path) -> Result<(), String> {
    let stage = out.with_extension("staging");
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage).map_err(|e| format!("cannot create {}: {e}", stage.display()))?;
    std::fs::write(stage.join(LOCK_IN_BUNDLE), lock_text).map_err(|e| format!("cannot write the lock: {e}"))?;
    let partial = out.with_extension("part");
    let result = Cmd::new("tar")
        .arg("-cf")
        .arg(partial.display().to_string())
        .arg("-C")
        .arg(stage.display().to_string())
        .arg(LOCK_IN_BUNDLE)
        .arg("-C")
        .arg(cache.display().to_string())
        .args(contents.entries.iter().cloned())
        .run_logged(log)
        .map_err(|e| format!("`{}` failed ({}); see {}", e.command, e.status, e.log.display()));
    let _ = std::fs::remove_dir_all(&stage);
    result?;
    std::fs::rename(&partial, out).map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// Unpacks a bundle into `cache` (entries already there are kept) and returns the path of its
/// lockfile, left in a directory of its own under the cache.
pub fn unpack(bundle: &Path, cache: &Path, log: &Path) -> Result<PathBuf, String> {
    let dir = cache.join("bundles").join(format!(
        "{}-{}",
        bundle
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Cmd::new("tar")
        .arg("-xf")
        .arg(bundle.display().to_string())
        .arg("-C")
        .arg(dir.display().to_string())
        .run_logged(log)
        .map_err(|e| {
            format!(
                "cannot unpack {} ({}); see {}",
                bundle.display(),
                e.status,
                e.log.display()
            )
        })?;
    let lock = dir.join(LOCK_IN_BUNDLE);
    if !lock.is_file() {
        return Err(format!(
            "{} holds no {LOCK_IN_BUNDLE}: not a kiln bundle (`kiln bundle` makes one)",
            bundle.display()
        ));
    }
    // sources/<sha>, git/<hash>, wheels/<xx>/<key>: move each into the cache unless present.
    for (top, depth) in [("sources", 1), ("git", 1), ("wheels", 2)] {
        let root = dir.join(top);
        for found in entries_at(&root, depth).into_iter().filter(|p| p.is_dir()) {
            let rel = found.strip_prefix(&root).unwrap_or(&found).to_path_buf();
            let dest = cache.join(top).join(&rel);
            if dest.exists() {
                continue;
            }
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            std::fs::rename(&found, &dest).map_err(|e| format!("cannot move {} into the cache: {e}", rel.display()))?;
        }
    }
    Ok(lock)
}
