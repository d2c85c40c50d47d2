//! A snapshot of an environment's files, taken before a run first installs anything: every
//! file of its site-packages and scripts directories hard-linked (copied where a link cannot be
//! made) into `<prefix>/.kiln-snapshot/<run>/`, on the environment's own file system. A
//! rollback puts each directory back exactly as the snapshot has it: what is not in it goes
//! (the new version's files, distributions the run added, an installer's `~` stash folders, a
//! half-written install), what differs or is missing comes back, dependencies the run upgraded
//! included, whatever installer made the change (pip, uv).
//!
//! A link shares the file's inode, so a file is unchanged exactly while its inode is the
//! snapshot's. That holds because installers replace files rather than write into them (pip
//! unlinks before it writes, `pip/_internal/operations/install/wheel.py` `ZipBackedFile.save`;
//! uv links or copies new files in) and kiln's own writes into an installed distribution go
//! through a temporary name and a rename (`owned`). It deliberately ignores the rest of the
//! prefix (`include/`, `share/`): wheels' data files there are not put back.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The directories covered and their copies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub dir: PathBuf,
    /// (live directory, its copy under `dir`).
    pub roots: Vec<(PathBuf, PathBuf)>,
}

/// What a restore changed: entries removed, files put back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Restored {
    pub removed: usize,
    pub restored: usize,
}

impl Snapshot {
    /// Snapshots each directory of `roots` that exists into `dir` (which must not exist yet).
    pub fn take(roots: &[PathBuf], dir: &Path) -> io::Result<Snapshot> {
        std::fs::create_dir_all(dir)?;
        let mut out = Snapshot {
            dir: dir.to_path_buf(),
            roots: Vec::new(),
        };
        let mut seen = Vec::new();
        for root in roots {
            let Ok(real) = root.canonicalize() else { continue };
            if seen.contains(&real) || !real.is_dir() {
                continue;
            }
            seen.push(real.clone());
            let copy = dir.join(out.roots.len().to_string());
            if let Err(e) = put(&real, &copy, dir) {
                out.discard();
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot snapshot {}: {e}", real.display()),
                ));
            }
            out.roots.push((real, copy));
        }
        Ok(out)
    }

    /// Puts every directory back as the snapshot has it. A copy that is gone (a discard cut
    /// short) is an error before anything is touched: restoring from it would delete the
    /// environment's files.
    pub fn restore(&self) -> io::Result<Restored> {
        if let Some((_, copy)) = self.roots.iter().find(|(_, copy)| !copy.is_dir()) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the snapshot's copy {} is gone; nothing was restored", copy.display()),
            ));
        }
        let mut n = Restored::default();
        for (live, copy) in &self.roots {
            restore_dir(live, copy, &mut n)?;
        }
        Ok(n)
    }

    /// The distributions in the snapshot: normalized name -> version.
    pub fn dists(&self) -> BTreeMap<String, String> {
        self.roots.iter().flat_map(|(_, copy)| dists_in(copy)).collect()
    }

    /// The distributions in the live directories now.
    pub fn dists_now(&self) -> BTreeMap<String, String> {
        self.roots.iter().flat_map(|(live, _)| dists_in(live)).collect()
    }

    /// Removes the copies (the live files keep their links).
    pub fn discard(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(parent) = self.dir.parent() {
            let _ = std::fs::remove_dir(parent); // only when no other run's is there
        }
    }
}

/// Where the snapshot of a run goes: beside the environment's lock when kiln may write there
/// (the same file system as site-packages, so files are linked, not copied), else the cache.
pub fn dir_for(lock: &Path, cache: &Path, run: &str) -> PathBuf {
    match lock.parent() {
        Some(p) if lock.file_name().is_some_and(|n| n == ".kiln-env.lock") => p.join(".kiln-snapshot").join(run),
        _ => cache.join("snapshots").join(run),
    }
}

/// `<name>-<version>.dist-info` directories in `dir`.
pub fn dists_in(dir: &Path) -> BTreeMap<String, String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".dist-info")?;
            let (n, v) = stem.split_once('-')?;
            Some((super::normalize(n), v.to_string()))
        })
        .collect()
}

/// Copies `from` (a file, link or directory tree) to `to`: files hard-linked where possible.
/// `skip` (the snapshot's own directory) is never entered.
fn put(from: &Path, to: &Path, skip: &Path) -> io::Result<usize> {
    let meta = std::fs::symlink_metadata(from)?;
    let t = meta.file_type();
    if t.is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)?;
        Ok(1)
    } else if t.is_dir() {
        if from == skip {
            return Ok(0);
        }
        std::fs::create_dir_all(to)?;
        std::fs::set_permissions(to, meta.permissions())?;
        let mut n = 0;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            n += put(&e.path(), &to.join(e.file_name()), skip)?;
        }
        Ok(n)
    } else if t.is_file() {
        if std::fs::hard_link(from, to).is_err() {
            std::fs::copy(from, to)?;
        }
        Ok(1)
    } else {
        Ok(0) // a fifo or socket in site-packages is no installer's
    }
}

fn remove(path: &Path, meta: &std::fs::Metadata) -> io::Result<()> {
    if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// Whether the live entry is the snapshot's own (the same inode, or the same link).
fn same(live: &Path, l: &std::fs::Metadata, copy: &Path, c: &std::fs::Metadata) -> bool {
    if l.file_type().is_symlink() && c.file_type().is_symlink() {
        return std::fs::read_link(live).ok() == std::fs::read_link(copy).ok();
    }
    l.is_file() && c.is_file() && l.dev() == c.dev() && l.ino() == c.ino()
}

fn ctx(p: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

fn restore_dir(live: &Path, copy: &Path, n: &mut Restored) -> io::Result<()> {
    for e in std::fs::read_dir(live).map_err(ctx(live))? {
        let e = e?;
        let (lp, cp) = (e.path(), copy.join(e.file_name()));
        let l = std::fs::symlink_metadata(&lp).map_err(ctx(&lp))?;
        match std::fs::symlink_metadata(&cp) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                remove(&lp, &l).map_err(ctx(&lp))?;
                n.removed += 1;
            }
            Err(err) => return Err(ctx(&cp)(err)),
            Ok(c) if l.is_dir() && c.is_dir() => restore_dir(&lp, &cp, n)?,
            Ok(c) if same(&lp, &l, &cp, &c) => {}
            Ok(_) => {
                remove(&lp, &l).map_err(ctx(&lp))?;
                n.restored += put(&cp, &lp, Path::new("")).map_err(ctx(&lp))?;
            }
        }
    }
    for e in std::fs::read_dir(copy).map_err(ctx(copy))? {
        let e = e?;
        let lp = live.join(e.file_name());
        if std::fs::symlink_metadata(&lp).is_err() {
            n.restored += put(&e.path(), &lp, Path::new("")).map_err(ctx(&lp))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_puts_back_changed_and_missing_files_and_removes_everything_new() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site");
        std::fs::create_dir_all(site.join("pkg")).unwrap();
        std::fs::create_dir_all(site.join("pkg-1.0.dist-info")).unwrap();
        std::fs::write(site.join("pkg/a.py"), "a1").unwrap();
        std::fs::write(site.join("pkg/b.py"), "b1").unwrap();
        std::fs::write(site.join("pkg-1.0.dist-info/RECORD"), "pkg/a.py,,\n").unwrap();
        std::os::unix::fs::symlink("pkg/a.py", site.join("link")).unwrap();
        let snap = Snapshot::take(std::slice::from_ref(&site), &dir.path().join("snap/run")).unwrap();
        assert_eq!(snap.dists(), BTreeMap::from([("pkg".into(), "1.0".into())]));

        // An upgrade the way pip does it: the old dist-info stashed in `~kg-1.0.dist-info`,
        // files unlinked and written anew, a file added, one removed, a new distribution.
        std::fs::rename(site.join("pkg-1.0.dist-info"), site.join("~kg-1.0.dist-info")).unwrap();
        std::fs::create_dir_all(site.join("pkg-2.0.dist-info")).unwrap();
        std::fs::remove_file(site.join("pkg/a.py")).unwrap();
        std::fs::write(site.join("pkg/a.py"), "a2").unwrap();
        std::fs::remove_file(site.join("pkg/b.py")).unwrap();
        std::fs::write(site.join("pkg/new.py"), "n").unwrap();
        std::fs::create_dir_all(site.join("dep-3.0.dist-info")).unwrap();
        assert_eq!(snap.dists_now().get("pkg").map(String::as_str), Some("2.0"));

        let n = snap.restore().unwrap();
        assert_eq!(std::fs::read_to_string(site.join("pkg/a.py")).unwrap(), "a1");
        assert_eq!(std::fs::read_to_string(site.join("pkg/b.py")).unwrap(), "b1");
        assert!(!site.join("pkg/new.py").exists());
        assert!(!site.join("~kg-1.0.dist-info").exists());
        assert_eq!(snap.dists_now(), snap.dists());
        assert_eq!(std::fs::read_link(site.join("link")).unwrap(), Path::new("pkg/a.py"));
        assert_eq!(n.removed, 4, "{n:?}");
        // A second restore finds nothing to do.
        assert_eq!(snap.restore().unwrap(), Restored::default());
        snap.discard();
        assert!(!dir.path().join("snap").exists());
        assert_eq!(std::fs::read_to_string(site.join("pkg/a.py")).unwrap(), "a1");
    }
}
