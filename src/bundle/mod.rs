//! Bundles: one archive that provisions an air-gapped node. It holds a lockfile and, from kiln's
//! cache, what reproducing it needs: the sdists and git mirrors of the locked sources and of
//! their declared build inputs (submodules' mirrors included), the
//! verified wheels the lock names (found by their sha256), the modules `install --aot` compiled
//! for the locked versions (`aot/<key>`), and a wheelhouse of the third-party
//! wheels that building and installing them offline needs ([`wheelhouse`]). `kiln install
//! --bundle FILE` unpacks it into the cache and installs offline; a wheel whose cache key matches
//! on the target (same Python, archs, toolkit, torch) is installed as is, anything else is built
//! from the bundled source. A bundle can be split into parts of a given size ([`parts`]).
//!
//! The archive is a plain tar (the `tar` crate; any `tar` program lists and unpacks it) holding
//! `kiln.lock` and the cache entries under their cache-relative paths. It holds directories and
//! regular files only, with their mtimes and executable bits and no owners; unpacking refuses
//! anything else (see [`crate::store::archive`]). It deliberately leaves out what kiln
//! does not cache: `path` sources (the directory must exist on the target) and what the lock says
//! the target already has (`installed` components and what they need).

use std::path::{Path, PathBuf};

use crate::apply::source::{mirror_dir, sha256_file};
use crate::cache_dir::entries_at;
use crate::lock::Lock;
use crate::recipe::{InputSource, RecipeSet, Source};
use crate::store::archive::{self, ArchiveError, Links};

mod check;
pub mod node_wheels;
mod pack;
pub mod parts;
pub mod planned;
pub mod wheelhouse;

pub use pack::write;

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
            // A value of another shape could name any directory (`/etc`, `../..`): the lock
            // reader refuses it, and so does this, for a lock made some other way.
            "sha256" if !crate::lock::is_sha256(value) => missing.push(format!(
                "{}: `{}` is not an sdist's sha256 (64 hex digits)",
                crate::shown::text(&comp.name),
                crate::shown::text(&comp.source)
            )),
            "wheel" if !crate::lock::is_sha256(value) => missing.push(format!(
                "{}: `{}` is not a wheel's sha256 (64 hex digits)",
                crate::shown::text(&comp.name),
                crate::shown::text(&comp.source)
            )),
            // A prebuilt wheel is fetched into the source cache by its sha256, as an sdist is.
            "sha256" | "wheel" => {
                let dir = Path::new("sources").join(value);
                if cache.join(&dir).is_dir() {
                    c.entries.push(dir.display().to_string());
                } else {
                    let what = if kind == "wheel" { "prebuilt wheel" } else { "sdist" };
                    missing.push(format!(
                        "{}: its {what} ({}) is not in the cache",
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
            "index" => {} // its wheel is in the wheelhouse
            _ => c.left_out.push(format!(
                "{}: `{}` is not bundled; the target must have it installed",
                crate::shown::text(&comp.name),
                crate::shown::text(&comp.source)
            )),
        }
        inputs_of(comp, set, cache, &mut c, &mut missing);
        // Modules compiled ahead of time (`install --aot`) for this version, as they are.
        c.entries
            .extend(crate::store::aot::entries_for(cache, &comp.name, comp.public_version()));
        // A prebuilt wheel is its source (above), not a wheel-cache entry.
        if let Some(sha) = comp.wheel_sha256.as_ref().filter(|_| kind != "wheel") {
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

/// The cache entries of the build inputs `comp` was built with: each archive's
/// `sources/<sha256>`, each git input's mirror at the locked commit and its submodules' mirrors.
fn inputs_of(comp: &crate::lock::Locked, set: &RecipeSet, cache: &Path, c: &mut Contents, missing: &mut Vec<String>) {
    if comp.inputs.is_empty() {
        return;
    }
    let version = comp.public_version().parse().ok();
    let declared = set.get(&comp.name).map(|r| r.build_of(version.as_ref()).inputs.clone());
    for (name, identity) in &comp.inputs {
        let Some(mut input) = declared.iter().flatten().find(|i| &i.name == name).cloned() else {
            missing.push(format!(
                "{}: its build input `{name}` ({identity}) is not declared by the recipe any more",
                comp.name
            ));
            continue;
        };
        // What the lock says it was, not what the recipe says now.
        match (identity.split_once(':'), &mut input.from) {
            (Some(("git", commit)), InputSource::Git { rev, .. }) => *rev = Some(commit.to_string()),
            (Some(("sha256", sha)), InputSource::Archive { sha256, .. } | InputSource::Wheel { sha256, .. })
                if crate::lock::is_sha256(sha) =>
            {
                *sha256 = sha.to_string()
            }
            _ => {
                missing.push(format!(
                    "{}: build input `{name}` = `{identity}` is not what the recipe declares",
                    comp.name
                ));
                continue;
            }
        }
        match crate::apply::inputs::cached(&input, cache) {
            Ok(dirs) => c.entries.extend(
                dirs.iter()
                    .map(|d| d.strip_prefix(cache).unwrap_or(d).display().to_string()),
            ),
            Err(why) => missing.push(format!("{}: build input `{name}`: {why}", comp.name)),
        }
    }
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

/// Why a bundle could not be written or unpacked.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot bundle {}: only directories and regular files are bundled", .0.display())]
    NotAFile(PathBuf),
    #[error("cannot unpack the bundle: {0}")]
    Unpack(#[from] ArchiveError),
    #[error("cannot move {} into the cache: {source}", entry.display())]
    Move {
        entry: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} holds no {LOCK_IN_BUNDLE}: not a kiln bundle (`kiln bundle` makes one)", .0.display())]
    NotABundle(PathBuf),
    #[error(transparent)]
    Parts(#[from] parts::PartsError),
    #[error("{}: {source}", bundle.display())]
    Lock {
        bundle: PathBuf,
        #[source]
        source: crate::lock::LockError,
    },
    #[error("refused the bundle {}: {source}", bundle.display())]
    Unexpected {
        bundle: PathBuf,
        #[source]
        source: check::Unexpected,
    },
}

/// Unpacks a bundle (whole, or split into parts: any of their names will do) into `cache`
/// (entries already there are kept) and returns the path of its lockfile, left in a directory
/// of its own under the cache. `set` names each locked component's distribution (its wheel
/// entries are checked against it). `watch` sees it as a [`Task::Unpack`].
///
/// [`Task::Unpack`]: crate::watch::Task::Unpack
pub fn unpack(
    bundle: &Path,
    cache: &Path,
    set: &RecipeSet,
    watch: &crate::watch::Watch,
) -> Result<PathBuf, BundleError> {
    let subject = bundle
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let task = watch.start(crate::watch::Task::Unpack, &subject, "into the cache");
    let got = unpack_checked(bundle, cache, set);
    task.finish(got.is_ok());
    got
}

fn unpack_checked(bundle: &Path, cache: &Path, set: &RecipeSet) -> Result<PathBuf, BundleError> {
    let pieces = parts::of(bundle)?;
    let bundles = cache.join("bundles");
    if pieces.len() == 1 {
        return unpack_whole(&pieces[0], cache, set);
    }
    std::fs::create_dir_all(&bundles).map_err(|source| BundleError::Write {
        path: bundles.clone(),
        source,
    })?;
    let joined = bundles.join(format!("joined-{}.tar", std::process::id()));
    parts::join(&pieces, &joined)?;
    let result = unpack_whole(&joined, cache, set);
    let _ = std::fs::remove_file(&joined);
    result
}

fn unpack_whole(bundle: &Path, cache: &Path, set: &RecipeSet) -> Result<PathBuf, BundleError> {
    let dir = cache.join("bundles").join(format!(
        "{}-{}",
        bundle
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|source| BundleError::Write {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    archive::unpack(bundle, &dir, Links::Refuse)?;
    let lock = dir.join(LOCK_IN_BUNDLE);
    if !lock.is_file() {
        return Err(BundleError::NotABundle(bundle.to_path_buf()));
    }
    // Only what `kiln bundle` would have written for this lock moves into the cache.
    let refused = crate::lock::read(&lock)
        .map_err(|source| BundleError::Lock {
            bundle: bundle.to_path_buf(),
            source,
        })
        .and_then(|l| {
            check::check(&dir, &l, set, cache).map_err(|source| BundleError::Unexpected {
                bundle: bundle.to_path_buf(),
                source,
            })
        });
    if let Err(e) = refused {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    // sources/<sha>, git/<hash>, wheels/<xx>/<key>, aot/<key>: move each into the cache unless
    // present.
    for (top, depth) in [("sources", 1), ("git", 1), ("wheels", 2), ("aot", 1)] {
        let root = dir.join(top);
        for found in entries_at(&root, depth).into_iter().filter(|p| p.is_dir()) {
            let rel = found.strip_prefix(&root).unwrap_or(&found).to_path_buf();
            let dest = cache.join(top).join(&rel);
            crate::store::place(&found, &dest).map_err(|source| BundleError::Move {
                entry: Path::new(top).join(&rel),
                source,
            })?;
        }
    }
    // wheelhouse/<file>.whl: third-party wheels, one flat directory.
    let house = crate::cache_dir::wheelhouse(cache);
    for e in std::fs::read_dir(dir.join("wheelhouse"))
        .into_iter()
        .flatten()
        .flatten()
    {
        crate::store::place(&e.path(), &house.join(e.file_name())).map_err(|source| BundleError::Move {
            entry: Path::new("wheelhouse").join(e.file_name()),
            source,
        })?;
    }
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::{Environment, Locked};

    #[test]
    fn a_lock_value_never_names_a_directory_outside_the_cache() {
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(cache.join("sources")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let set = RecipeSet {
            recipes: Default::default(),
            origin: "test".into(),
        };
        for source in [format!("sha256:{}", outside.display()), "sha256:../../outside".into()] {
            let lock = Lock {
                format: crate::lock::FORMAT,
                environment: Environment {
                    python: "3.12.3".into(),
                    platform: None,
                    archs: Vec::new(),
                    cuda: None,
                    planned_for: None,
                },
                components: vec![Locked {
                    name: "x".into(),
                    version: "1.0".into(),
                    features: Vec::new(),
                    source: source.clone(),
                    wheel_sha256: None,
                    wheel_url: None,
                    archs: Vec::new(),
                    cuda: None,
                    built_against: Default::default(),
                    inputs: Default::default(),
                }],
            };
            let (c, missing) = contents(&lock, &set, &cache);
            assert!(c.entries.is_empty(), "{source}: {:?}", c.entries);
            assert_eq!(missing.len(), 1, "{source}");
        }
    }
}
