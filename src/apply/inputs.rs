//! A build's declared inputs (see [`crate::recipe::inputs`]), fetched before the build starts:
//! a git input checked out at its commit from the cache's mirror (with the submodules it names,
//! each from its own mirror), an archive checked against its sha256 and unpacked, files out of a wheel checked
//! against its sha256 ([`super::wheel_files`]), each into
//! `<work>/inputs/<name>/`, so that a build never writes into the cache. Offline, only what the
//! cache holds is used; [`cached`] says (without running anything but `git` on the mirrors)
//! whether it holds all of an input, which is what `--offline` checks before anything runs and
//! what a bundle carries.
//!
//! It deliberately ignores how the build is pointed at them (the plan rendered the variables)
//! and re-implements nothing of fetching: [`super::source`] does it for the main source too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::source::{self, NotCached, SourceError, git};
use crate::recipe::Source;
use crate::recipe::inputs::{Input, InputSource, Submodules};

/// One input, fetched: the directory its variables point at, and what exactly it is.
#[derive(Debug, Clone)]
pub struct FetchedInput {
    pub name: String,
    pub dir: PathBuf,
    /// `git:<commit>` or `sha256:<hex>`.
    pub identity: String,
}

fn which(s: &Submodules) -> git::Which<'_> {
    match s {
        Submodules::None => git::Which::None,
        Submodules::All => git::Which::All,
        Submodules::Only(paths) => git::Which::Only(paths),
    }
}

/// Fetches every input into `<work>/inputs/<name>`.
pub fn fetch(
    inputs: &[Input],
    work: &Path,
    cache: &Path,
    offline: bool,
    log: &Path,
    mut told: source::Told,
) -> Result<Vec<FetchedInput>, SourceError> {
    inputs
        .iter()
        .map(|i| fetch_one(i, &work.join("inputs").join(&i.name), cache, offline, log, told.again()))
        .collect()
}

fn fetch_one(
    input: &Input,
    root: &Path,
    cache: &Path,
    offline: bool,
    log: &Path,
    told: source::Told,
) -> Result<FetchedInput, SourceError> {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root).map_err(source::io(format!("cannot create {}", root.display())))?;
    let (dir, identity) = match &input.from {
        InputSource::Git {
            git: url,
            rev,
            tag,
            submodules,
        } => {
            let dir = root.join("src");
            let wanted = rev.as_deref().or(tag.as_deref()).unwrap_or_default();
            let commit = git::checkout(url, wanted, which(submodules), &dir, cache, offline, log)?;
            // A pinned commit whose tag (as the mirror has it now) names another commit: the
            // recipe and upstream disagree, and kiln says so rather than pick one.
            if let (Some(rev), Some(tag)) = (rev, tag)
                && let Some(at) = git::tag_commit(url, tag, cache)
                && !at.eq_ignore_ascii_case(rev)
            {
                return Err(SourceError::TagMoved {
                    url: url.clone(),
                    tag: tag.clone(),
                    pinned: rev.clone(),
                    found: at,
                });
            }
            (dir, format!("git:{commit}"))
        }
        InputSource::Archive { archive, sha256 } => {
            let src = Source::Sdist {
                url: archive.clone(),
                sha256: sha256.clone(),
            };
            let fetched = source::fetch(&src, None, root, cache, offline, log, told)
                .map_err(|e| offline_as(e, |url, dir| NotCached::Archive { url, dir }))?;
            (fetched.dir, fetched.identity)
        }
        InputSource::Wheel {
            wheel,
            sha256,
            member,
            place,
        } => {
            let file = source::cached_download(wheel, sha256, cache, offline, told)
                .map_err(|e| offline_as(e, |url, dir| NotCached::Wheel { url, dir }))?;
            let dir = root.join("src");
            super::wheel_files::extract(&file, wheel, member, place, &dir)?;
            (dir, format!("sha256:{sha256}"))
        }
    };
    let tree = match &input.subdir {
        Some(s) => dir.join(s),
        None => dir,
    };
    if !tree.is_dir() {
        return Err(SourceError::NoSubdir {
            url: describe(&input.from),
            rev: identity,
            subdir: input.subdir.clone().unwrap_or_default(),
        });
    }
    Ok(FetchedInput {
        name: input.name.clone(),
        dir: tree,
        identity,
    })
}

/// An input that is not in the source cache, named as what it is (an archive, a wheel) rather
/// than as the sdist `source` calls every downloaded file.
fn offline_as(e: SourceError, what: impl FnOnce(String, PathBuf) -> NotCached) -> SourceError {
    match e {
        SourceError::Offline {
            what: NotCached::Sdist { url, dir },
        } => SourceError::Offline { what: what(url, dir) },
        other => other,
    }
}

/// The cache entries (absolute paths: `sources/<sha256>`, `git/<mirror>`, the submodules'
/// mirrors) an input needs, when the cache holds all of them; else the first one missing.
pub fn cached(input: &Input, cache: &Path) -> Result<Vec<PathBuf>, NotCached> {
    match &input.from {
        InputSource::Git {
            git: url,
            rev,
            tag,
            submodules,
        } => {
            let wanted = rev.as_deref().or(tag.as_deref()).unwrap_or_default();
            git::needed(url, wanted, which(submodules), cache)
        }
        InputSource::Archive { archive, sha256 } => {
            let src = Source::Sdist {
                url: archive.clone(),
                sha256: sha256.clone(),
            };
            match source::cached(&src, cache) {
                Ok(()) => Ok(vec![cache.join("sources").join(sha256)]),
                Err(NotCached::Sdist { url, dir }) => Err(NotCached::Archive { url, dir }),
                Err(other) => Err(other),
            }
        }
        InputSource::Wheel { wheel, sha256, .. } => {
            let dir = cache.join("sources").join(sha256);
            let name = wheel.rsplit('/').next().unwrap_or(wheel);
            if dir.join(name).is_file() {
                Ok(vec![dir])
            } else {
                Err(NotCached::Wheel {
                    url: wheel.clone(),
                    dir,
                })
            }
        }
    }
}

/// The variables' directories by input name, for the run's values.
pub fn dirs(fetched: &[FetchedInput]) -> BTreeMap<String, String> {
    fetched
        .iter()
        .map(|f| (f.name.clone(), f.dir.display().to_string()))
        .collect()
}

/// An input in a few words, for progress and errors.
pub fn describe(from: &InputSource) -> String {
    match from {
        InputSource::Git { git, rev, tag, .. } => {
            let at = match (rev, tag) {
                (Some(r), Some(t)) => format!("{t} ({})", &r[..r.len().min(12)]),
                (Some(r), None) => r[..r.len().min(12)].to_string(),
                (None, Some(t)) => t.clone(),
                (None, None) => String::new(),
            };
            format!("{git} @ {at}")
        }
        InputSource::Archive { archive, .. } => archive.rsplit('/').next().unwrap_or(archive).to_string(),
        InputSource::Wheel { wheel, member, .. } => {
            format!("{} : {member}", wheel.rsplit('/').next().unwrap_or(wheel))
        }
    }
}
