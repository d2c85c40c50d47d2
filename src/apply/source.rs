//! Getting a component's source tree: a checked sdist (downloaded once into the source cache),
//! a git checkout at a rev (from a mirror of the repository kept in the cache and brought up to
//! date before each use), a copy of a local directory, each unpacked into a fresh build
//! directory so that a build never writes into the user's files. Offline, only what the cache
//! holds is used, and a source it does not hold is an error that says so. Two kilns on one
//! cache download a file in turn, and the one that waits is told whom for ([`Told`]).
//!
//! It deliberately ignores building; `git` is run as a program, not re-implemented ([`git`]:
//! mirrors, checkouts, submodules from mirrors of their own); sdists are unpacked by [`archive`]
//! (no `tar` program).

pub mod git;

use std::path::{Path, PathBuf};

use crate::process::CommandFailed;
use crate::recipe::Source;
use crate::store::archive;
pub use git::mirror_dir;

/// A source tree ready to build, and what exactly it is (for the lockfile).
#[derive(Debug, Clone)]
pub struct Fetched {
    pub dir: PathBuf,
    /// `sha256:<hex>` of the sdist, `git:<commit>`, or `path:<dir>`.
    pub identity: String,
}

/// What to do when a source is not in the cache and the network may not be used.
pub const OFFLINE_HINT: &str = "run once with the network first";

/// A source that an offline run needs and the cache does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCached {
    #[error("the sdist {url} is not in the source cache")]
    Sdist { url: String, dir: PathBuf },
    #[error(
        "the git repository {url}{} is not in the source cache (seed it from a local clone or bare repository: `kiln cache add-mirror {url} DIR`)",
        submodule.as_deref().map(|s| format!(" ({s})")).unwrap_or_default()
    )]
    Git {
        url: String,
        dir: PathBuf,
        /// `submodule `PATH` of URL` when it is a submodule's mirror.
        submodule: Option<String>,
    },
    #[error(
        "the source cache's mirror of {url} has no commit `{rev}` (seed it from a clone that has: `kiln cache add-mirror {url} DIR`)"
    )]
    Commit { url: String, rev: String, dir: PathBuf },
    /// More than one mirror missing (a repository's submodules), each named.
    #[error("{}", .0.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("; "))]
    Several(Vec<NotCached>),
    #[error("the archive {url} is not in the source cache")]
    Archive { url: String, dir: PathBuf },
    #[error("the wheel {url} is not in the source cache")]
    Wheel { url: String, dir: PathBuf },
}

impl NotCached {
    /// Where the cache would hold it.
    pub fn dir(&self) -> &Path {
        match self {
            NotCached::Several(all) => all.first().map_or(Path::new(""), NotCached::dir),
            NotCached::Sdist { dir, .. }
            | NotCached::Git { dir, .. }
            | NotCached::Commit { dir, .. }
            | NotCached::Archive { dir, .. }
            | NotCached::Wheel { dir, .. } => dir,
        }
    }

    /// What the user can do about it.
    pub fn hint(&self) -> &'static str {
        OFFLINE_HINT
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("download of {url} failed: {detail}")]
    Download { url: String, detail: String },
    #[error("sha256 mismatch for {url}: the recipe pins {want}, the file has {got}")]
    Checksum { url: String, want: String, got: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Command(#[from] CommandFailed),
    #[error(transparent)]
    Archive(#[from] archive::ArchiveError),
    #[error("source path {} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("the wheel {url} has no member `{member}`")]
    NoMember { url: String, member: String },
    #[error("{url} at {rev} has no directory `{subdir}`")]
    NoSubdir { url: String, rev: String, subdir: String },
    #[error("{url} has no commit, tag or branch `{rev}`")]
    NoRev { url: String, rev: String },
    #[error("a binary wheel has no source tree")]
    NoSourceTree,
    #[error("a symbolic link leads back into a directory being copied: {}", .0.display())]
    LinkCycle(PathBuf),
    #[error("offline: {what} ({}); {}", what.dir().display(), what.hint())]
    Offline { what: NotCached },
    #[error("{url}: the recipe pins tag {tag} to commit {pinned}, but the tag now names {found}")]
    TagMoved {
        url: String,
        tag: String,
        pinned: String,
        found: String,
    },
}

impl SourceError {
    /// What the user can do about it, where kiln knows.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            SourceError::Offline { what } => Some(what.hint()),
            _ => None,
        }
    }
}

pub(super) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> SourceError {
    let context = context.into();
    move |source| SourceError::Io { context, source }
}

/// Fetches `source` into `work` (a fresh, empty directory). `recipe_dir` resolves relative
/// paths; `cache` holds downloads; logs go to `log`.
pub fn fetch(
    source: &Source,
    recipe_dir: Option<&Path>,
    work: &Path,
    cache: &Path,
    offline: bool,
    log: &Path,
    told: Told,
) -> Result<Fetched, SourceError> {
    std::fs::create_dir_all(work).map_err(io(format!("cannot create {}", work.display())))?;
    match source {
        Source::Path { path } => {
            let from = match recipe_dir {
                Some(d) if path.is_relative() => d.join(path),
                _ => path.clone(),
            };
            if !from.is_dir() {
                return Err(SourceError::NotADirectory(from));
            }
            let dir = work.join("src");
            copy_tree(&from, &dir)?;
            Ok(Fetched {
                dir,
                identity: format!("path:{}", from.display()),
            })
        }
        Source::Sdist { url, sha256 } => {
            let archive = cached_download(url, sha256, cache, offline, told)?;
            let unpack = work.join("src");
            archive::unpack(&archive, &unpack, archive::Links::InsideTree)?;
            // An sdist holds one top-level directory `<name>-<version>/`.
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&unpack)
                .map_err(io("cannot read the unpacked sdist"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            let dir = match entries.len() {
                1 if entries[0].is_dir() => entries.remove(0),
                _ => unpack,
            };
            Ok(Fetched {
                dir,
                identity: format!("sha256:{sha256}"),
            })
        }
        Source::Git {
            url,
            rev,
            subdir,
            submodules,
        } => {
            let dir = work.join("src");
            let which = if *submodules { git::Which::All } else { git::Which::None };
            let commit = git::checkout(url, rev, which, &dir, cache, offline, log)?;
            let tree = match subdir {
                Some(s) => dir.join(s),
                None => dir,
            };
            if !tree.is_dir() {
                return Err(SourceError::NoSubdir {
                    url: url.clone(),
                    rev: rev.clone(),
                    subdir: subdir.as_deref().unwrap_or("").to_string(),
                });
            }
            Ok(Fetched {
                dir: tree,
                identity: format!("git:{commit}"),
            })
        }
        Source::Wheel { .. } => Err(SourceError::NoSourceTree),
    }
}

/// Whether the source is in the cache, so that an offline build can use it. Paths and wheels
/// are not cached sources; wheels come from the installer's own cache offline.
pub fn cached(source: &Source, cache: &Path) -> Result<(), NotCached> {
    match source {
        Source::Sdist { url, sha256 } => {
            let dir = cache.join("sources").join(sha256);
            let have = std::fs::read_dir(&dir)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .any(|e| !e.path().to_string_lossy().ends_with(".part"))
                })
                .unwrap_or(false);
            if have {
                Ok(())
            } else {
                Err(NotCached::Sdist { url: url.clone(), dir })
            }
        }
        Source::Git { url, .. } => {
            let dir = mirror_dir(url, cache);
            if dir.join("HEAD").is_file() {
                Ok(())
            } else {
                Err(NotCached::Git {
                    url: url.clone(),
                    dir,
                    submodule: None,
                })
            }
        }
        Source::Path { .. } | Source::Wheel { .. } => Ok(()),
    }
}

/// The error and, when there is one, what to do about it.
fn download_detail(e: &crate::download::DownloadError) -> String {
    match e.hint() {
        Some(hint) => format!("{e}\n  hint: {hint}"),
        None => e.to_string(),
    }
}

/// What a fetch tells as it goes: the bytes of a download (`done`, `total` when announced),
/// and another kiln it waits for first (one fetching the same file), so that no wait is silent.
pub struct Told<'a> {
    pub bytes: &'a mut dyn FnMut(u64, Option<u64>),
    /// Told who holds the file (a [`crate::store::locks::Holder`]: pid, command, since when).
    pub waiting: &'a mut dyn FnMut(&dyn std::fmt::Display),
}

impl Told<'_> {
    /// The same listeners for one more fetch of several in a row.
    pub fn again(&mut self) -> Told<'_> {
        Told {
            bytes: &mut *self.bytes,
            waiting: &mut *self.waiting,
        }
    }
}

/// Returns the cached archive for `url`, downloading and checking it first if needed; `told`
/// hears the bytes, and another kiln downloading the same file first (this one waits for it).
pub fn cached_download(
    url: &str,
    sha256: &str,
    cache: &Path,
    offline: bool,
    told: Told,
) -> Result<PathBuf, SourceError> {
    let Told {
        bytes: progress,
        waiting,
    } = told;
    let file_name = url
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("source.tar.gz");
    let dir = cache.join("sources").join(sha256);
    let dest = dir.join(file_name);
    if dest.is_file() && sha256_file(&dest)? == sha256 {
        return Ok(dest);
    }
    if offline {
        return Err(SourceError::Offline {
            what: NotCached::Sdist { url: url.into(), dir },
        });
    }
    // Two kilns on one cache fetch one source in turn: the second finds the first's file.
    let lock = crate::store::locks::source_lock(cache, sha256);
    let _held =
        crate::store::locks::take(&lock, "the source download", true, |h| waiting(h)).map_err(|e| SourceError::Io {
            context: format!("cannot lock {}", lock.display()),
            source: match e {
                crate::store::locks::LockError::Io { error, .. } => error,
                busy => std::io::Error::other(busy.to_string()),
            },
        })?;
    if dest.is_file() && sha256_file(&dest)? == sha256 {
        return Ok(dest);
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let partial = dir.join(format!("{file_name}.part"));
    // A local file is copied whole; a download resumes what an earlier run left in `partial`.
    let local = url
        .strip_prefix("file://")
        .map(PathBuf::from)
        .or_else(|| (!url.contains("://")).then(|| PathBuf::from(url)));
    match local {
        Some(p) => {
            std::fs::copy(&p, &partial).map_err(io(format!("cannot copy {}", p.display())))?;
        }
        None => {
            let failed = |e: crate::download::DownloadError| SourceError::Download {
                url: url.into(),
                detail: download_detail(&e),
            };
            let policy = crate::download::Policy::from_env().map_err(failed)?;
            crate::download::fetch(url, &partial, &policy, progress).map_err(failed)?;
        }
    }
    let got = sha256_file(&partial)?;
    if got != sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(SourceError::Checksum {
            url: url.into(),
            want: sha256.into(),
            got,
        });
    }
    // A whole, checked file replaces a bad one left there; it is never written in place.
    if dest.exists() {
        let _ = std::fs::remove_file(&dest);
    }
    crate::store::place(&partial, &dest).map_err(io("cannot move the download into the cache"))?;
    Ok(dest)
}

/// The sha256 of the regular file `path` (`crate::store::sha256_file`), as a source error.
pub fn sha256_file(path: &Path) -> Result<String, SourceError> {
    crate::store::sha256_file(path).map_err(io(format!("cannot hash {}", path.display())))
}

/// Copies a local source tree for a build, leaving out `.git` directories.
///
/// A symbolic link that resolves inside the tree stays a link, made relative so that it points
/// into the copy and never back into the user's tree. One that leads outside the tree (a
/// monorepo's shared `LICENSE`, a vendored directory) is copied as what it points to, a file or
/// a directory copied by these same rules, so the build finds it and cannot write through it
/// into the user's files; a link back into a directory being copied is an error. A dangling link
/// is kept as it is (it points nowhere in the copy either). Sockets, fifos and devices are not
/// source and are left out.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), SourceError> {
    let root = std::fs::canonicalize(from).map_err(io(format!("cannot read {}", from.display())))?;
    let mut copying = vec![root.clone()];
    copy_dir(&Roots { from: &root, to }, &root, to, &mut copying)
}

/// The tree being copied (canonical) and its copy.
struct Roots<'a> {
    from: &'a Path,
    to: &'a Path,
}

fn copy_dir(roots: &Roots, from: &Path, to: &Path, copying: &mut Vec<PathBuf>) -> Result<(), SourceError> {
    std::fs::create_dir_all(to).map_err(io(format!("cannot create {}", to.display())))?;
    for entry in std::fs::read_dir(from).map_err(io(format!("cannot read {}", from.display())))? {
        let entry = entry.map_err(io(format!("cannot read {}", from.display())))?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let ty = entry.file_type().map_err(io("cannot stat"))?;
        let (src, dest) = (entry.path(), to.join(&name));
        if ty.is_dir() {
            copy_dir(roots, &src, &dest, copying)?;
        } else if ty.is_file() {
            std::fs::copy(&src, &dest).map_err(io(format!("cannot copy {}", src.display())))?;
        } else if ty.is_symlink() {
            copy_link(roots, &src, &dest, copying)?;
        }
    }
    Ok(())
}

fn copy_link(roots: &Roots, src: &Path, dest: &Path, copying: &mut Vec<PathBuf>) -> Result<(), SourceError> {
    let link = |target: &Path| {
        std::os::unix::fs::symlink(target, dest).map_err(io(format!("cannot create the link {}", dest.display())))
    };
    let Ok(real) = std::fs::canonicalize(src) else {
        let target = std::fs::read_link(src).map_err(io(format!("cannot read the link {}", src.display())))?;
        return link(&target);
    };
    let inside = real.starts_with(roots.from) && !real.starts_with(roots.from.join(".git"));
    if inside {
        let here = dest
            .parent()
            .and_then(|p| p.strip_prefix(roots.to).ok())
            .unwrap_or(Path::new(""));
        let there = real.strip_prefix(roots.from).unwrap_or(Path::new(""));
        return link(&relative(here, there));
    }
    if real.is_dir() {
        if copying.iter().any(|c| c.starts_with(&real)) {
            return Err(SourceError::LinkCycle(src.to_path_buf()));
        }
        copying.push(real.clone());
        let result = copy_dir(roots, &real, dest, copying);
        copying.pop();
        return result;
    }
    std::fs::copy(&real, dest).map_err(io(format!("cannot copy {}", real.display())))?;
    Ok(())
}

/// The relative path from the directory `from` to `to` (both relative to one root).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (a, b): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::relative;
    use std::path::Path;

    #[test]
    fn relative_paths_between_directories_of_one_tree() {
        let r = |a: &str, b: &str| relative(Path::new(a), Path::new(b)).display().to_string();
        assert_eq!(r("", "pkg/real.py"), "pkg/real.py");
        assert_eq!(r("pkg/sub", "pkg/real.py"), "../real.py");
        assert_eq!(r("a/b", "c"), "../../c");
        assert_eq!(r("pkg", "pkg"), ".");
        assert_eq!(r("pkg", ""), "..");
    }
}
