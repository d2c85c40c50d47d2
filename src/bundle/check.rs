//! What an unpacked bundle may hold: exactly what `kiln bundle` would put in it for its lock
//! (see [`super::contents`]), checked before anything moves into the cache. `sources/<sha256>`
//! for each locked sdist or build-input archive, `git/<mirror>` when the lock has a git source
//! or git build input (submodules' mirrors included), `wheels/<xx>/<key>`
//! whose one wheel has a sha256 the lock names (and that its entry records), `aot/<key>`, and
//! `wheelhouse/*.whl` files. Anything else is refused, naming it; a wheel the lock does not
//! name is moved aside under `<cache>/quarantine/` and named too.
//!
//! It deliberately ignores what is inside a source or a mirror (the build checks an sdist's
//! hash and git checks its objects) and what an `aot` entry holds (its manifest is read when
//! it is used).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::build::source::sha256_file;
use crate::lock::Lock;

/// Why an unpacked bundle was refused.
#[derive(Debug, thiserror::Error)]
pub enum Unexpected {
    #[error("it holds `{0}`, which its kiln.lock does not name (kiln bundle never writes it)")]
    NotNamed(String),
    #[error(
        "its wheel `{entry}` has sha256 {got}, which its kiln.lock does not name for any component; it was moved aside to {}",
        moved.display()
    )]
    Wheel { entry: String, got: String, moved: PathBuf },
}

/// Checks the bundle unpacked at `dir` against its `lock`; a refused wheel entry is moved to
/// a quarantine under `cache`.
pub fn check(dir: &Path, lock: &Lock, cache: &Path) -> Result<(), Unexpected> {
    // Each component's source and its declared build inputs.
    let identities = || {
        lock.components
            .iter()
            .flat_map(|c| std::iter::once(&c.source).chain(c.inputs.values()))
    };
    // An sdist's or a prebuilt wheel's (`wheel:`) sha256: both are `sources/<sha256>`.
    let sources: BTreeSet<&str> = identities()
        .filter_map(|s| s.strip_prefix("sha256:").or_else(|| s.strip_prefix("wheel:")))
        .collect();
    let has_git = identities().any(|s| s.starts_with("git:"));
    let wheels: BTreeSet<&str> = lock
        .components
        .iter()
        .filter_map(|c| c.wheel_sha256.as_deref())
        .collect();
    let not_named = |rel: &Path| Unexpected::NotNamed(rel.display().to_string());
    for (top, rel, is_dir) in listing(dir, Path::new("")) {
        let ok = match top.as_str() {
            "kiln.lock" => !is_dir,
            "sources" | "git" | "wheels" | "aot" | "wheelhouse" => is_dir,
            _ => false,
        };
        if !ok {
            return Err(not_named(&rel));
        }
    }
    for (name, rel, is_dir) in listing(dir, Path::new("sources")) {
        if !is_dir || !sources.contains(name.as_str()) {
            return Err(not_named(&rel));
        }
    }
    for (name, rel, is_dir) in listing(dir, Path::new("git")) {
        if !is_dir || !has_git || name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_named(&rel));
        }
    }
    for (_, rel, is_dir) in listing(dir, Path::new("aot")) {
        if !is_dir {
            return Err(not_named(&rel));
        }
    }
    for (name, rel, is_dir) in listing(dir, Path::new("wheelhouse")) {
        if is_dir || !name.ends_with(".whl") {
            return Err(not_named(&rel));
        }
    }
    for (_, rel, is_dir) in listing(dir, Path::new("wheels")) {
        if !is_dir {
            return Err(not_named(&rel));
        }
        for (name, entry, is_dir) in listing(dir, &rel) {
            let shard = rel.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if !is_dir || !crate::lock::is_sha256(&name) || !name.starts_with(&shard) {
                return Err(not_named(&entry));
            }
            wheel_entry(dir, &entry, &wheels, cache)?;
        }
    }
    Ok(())
}

/// A wheel cache entry: its files are the wheel, `key.json`, `wheel.sha256` and maybe
/// `unverified.json`; the wheel's sha256 is one the lock names and the one its record says.
fn wheel_entry(dir: &Path, entry: &Path, named: &BTreeSet<&str>, cache: &Path) -> Result<(), Unexpected> {
    let files = listing(dir, entry);
    let whl: Vec<&(String, PathBuf, bool)> = files.iter().filter(|(n, _, _)| n.ends_with(".whl")).collect();
    for (name, rel, is_dir) in &files {
        let known = ["key.json", "wheel.sha256", "unverified.json"].contains(&name.as_str()) || name.ends_with(".whl");
        if *is_dir || !known {
            return Err(Unexpected::NotNamed(rel.display().to_string()));
        }
    }
    let [(_, wheel, _)] = whl[..] else {
        return Err(Unexpected::NotNamed(entry.display().to_string()));
    };
    let got = sha256_file(&dir.join(wheel)).unwrap_or_else(|e| format!("none ({e})"));
    let record = std::fs::read_to_string(dir.join(entry).join("wheel.sha256")).ok();
    if named.contains(got.as_str()) && record.is_none_or(|r| r.trim() == got) {
        return Ok(());
    }
    let moved = crate::build::wheels::quarantine_path(
        cache,
        &format!(
            "bundle-wheel-{}",
            entry.file_name().unwrap_or_default().to_string_lossy()
        ),
    );
    let done = moved
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::rename(dir.join(entry), &moved));
    if done.is_err() {
        let _ = std::fs::remove_dir_all(dir.join(entry));
    }
    Err(Unexpected::Wheel {
        entry: wheel.display().to_string(),
        got,
        moved,
    })
}

/// The members directly below `rel` in `dir`: name, path relative to `dir`, whether a
/// directory (anything not a plain directory or file was refused when unpacking).
fn listing(dir: &Path, rel: &Path) -> Vec<(String, PathBuf, bool)> {
    let mut out: Vec<(String, PathBuf, bool)> = std::fs::read_dir(dir.join(rel))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (name.clone(), rel.join(name), is_dir)
        })
        .collect();
    out.sort();
    out
}
