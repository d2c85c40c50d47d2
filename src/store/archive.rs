//! Archives without the `tar` program: unpacking sdists (`.tar.gz`, `.tar`, `.zip`, told apart
//! by their first bytes) and kiln's bundles (plain tar), and the checks that make an archive
//! from elsewhere safe to unpack.
//!
//! What gets written: directories and regular files, with the executable bit kept (0o755, else
//! 0o644, less the umask) and every other mode bit dropped (setuid, setgid, sticky), no owners,
//! and tar mtimes kept (make-style builds compare them). A hard link becomes a copy of the
//! earlier member it names. Symbolic links only where the caller allows them: real sdists carry
//! them (scikit-build stored symlinks as they were,
//! <https://github.com/scikit-build/scikit-build/issues/401>,
//! <https://github.com/scikit-build/scikit-build-core/issues/801>), and each must resolve inside
//! the unpacked tree; links are made after every file, so no member is ever written through
//! one. Refused, naming the member: absolute paths, `..`, devices, fifos, a link that leaves the
//! tree. Everything goes into `<dest>.part`, which is moved to `dest` only when complete and
//! removed when not. Sizes are limited per member and in total ([`Limits`]), by the size a
//! member declares and again by the bytes written while streaming: a plain tar (a bundle) may
//! unpack to no more than the archive holds (a sparse member that claims 4 GiB is refused), a
//! compressed one to [`Limits::COMPRESSED`]. The archive itself is read only if it is a
//! regular file ([`open_regular`]).
//!
//! It deliberately ignores bzip2 and xz compression (sdists are `.tar.gz` since PEP 625,
//! <https://peps.python.org/pep-0625/>), extended attributes, and zip mtimes.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

pub use limits::{Limits, open_regular};

/// Whether symbolic links in an archive are unpacked (inside the tree only) or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    Refuse,
    InsideTree,
}

/// Why a member of an archive was not unpacked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("an absolute path")]
    Absolute,
    #[error("a path with `..`")]
    ParentDir,
    #[error("an empty name")]
    Empty,
    #[error("{0}, not a regular file, directory or symbolic link")]
    Kind(&'static str),
    #[error("a symbolic link, which this archive may not hold")]
    LinkNotAllowed,
    #[error("a symbolic link to `{0}`, outside the unpacked tree")]
    LinkOutside(String),
    #[error("a path through a symbolic link of the archive")]
    ThroughLink,
    #[error("a hard link to `{0}`, which is not a file unpacked before it")]
    HardLinkMissing(String),
    #[error("{size} bytes or more, over the limit of {limit} bytes {what}")]
    TooLarge { what: &'static str, size: u64, limit: u64 },
}

/// Why an archive could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot read {}: {source}", archive.display())]
    Read {
        archive: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", crate::shown::path(path))]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a zip archive kiln can read: {detail}", archive.display())]
    Zip { archive: PathBuf, detail: String },
    #[error("{} is {compression}-compressed; kiln unpacks .tar.gz, .tar and .zip", archive.display())]
    Unsupported {
        archive: PathBuf,
        compression: &'static str,
    },
    #[error("{}: refused member `{member}`: {why}", archive.display())]
    Refused {
        archive: PathBuf,
        member: String,
        why: Refusal,
    },
}

/// Unpacks `archive` into `dest` (which must not exist yet, or be an empty directory), within
/// the limits its kind calls for (see [`Limits`]).
pub fn unpack(archive: &Path, dest: &Path, links: Links) -> Result<(), ArchiveError> {
    unpack_limited(archive, dest, links, None)
}

/// [`unpack`] within `limits` (`None`: the limits its kind calls for).
pub fn unpack_limited(archive: &Path, dest: &Path, links: Links, limits: Option<Limits>) -> Result<(), ArchiveError> {
    let part = part_of(dest);
    let _ = std::fs::remove_dir_all(&part);
    let result = unpack_into(archive, &part, links, limits).and_then(|()| {
        std::fs::rename(&part, dest).map_err(|source| ArchiveError::Write {
            path: dest.to_path_buf(),
            source,
        })
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&part);
    }
    result
}

fn part_of(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

fn unpack_into(archive: &Path, root: &Path, links: Links, limits: Option<Limits>) -> Result<(), ArchiveError> {
    let read = |source| ArchiveError::Read {
        archive: archive.to_path_buf(),
        source,
    };
    let mut magic = [0u8; 6];
    let file = open_regular(archive).map_err(read)?;
    let len = file.metadata().map_err(read)?.len();
    let n = read_up_to(&mut &file, &mut magic).map_err(read)?;
    let magic = &magic[..n];
    let compressed = [&b"PK"[..], &[0x1f, 0x8b]].iter().any(|m| magic.starts_with(m));
    let limits = limits.unwrap_or(if compressed {
        Limits::COMPRESSED
    } else {
        Limits::plain(len)
    });
    let mut tree = Tree::new(archive, root, links, limits)?;
    let file = open_regular(archive).map_err(read)?;
    if magic.starts_with(b"PK") {
        unpack_zip(file, &mut tree)?;
    } else if magic.starts_with(&[0x1f, 0x8b]) {
        unpack_tar(flate2::read::MultiGzDecoder::new(BufReader::new(file)), &mut tree)?;
    } else if magic.starts_with(b"BZh") {
        return Err(tree.unsupported("bzip2"));
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        return Err(tree.unsupported("xz"));
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err(tree.unsupported("zstd"));
    } else {
        unpack_tar(BufReader::new(file), &mut tree)?;
    }
    tree.finish()
}

fn read_up_to(f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn unpack_tar(reader: impl Read, tree: &mut Tree) -> Result<(), ArchiveError> {
    let mut ar = tar::Archive::new(reader);
    for entry in ar.entries().map_err(|e| tree.read_error(e))? {
        let mut entry = entry.map_err(|e| tree.read_error(e))?;
        let name = entry.path().map_err(|e| tree.read_error(e))?.into_owned();
        let ty = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o644);
        let mtime = entry.header().mtime().ok();
        // Old (v7) archives mark a directory only by the slash that ends its name.
        let slash = entry.path_bytes().ends_with(b"/");
        use tar::EntryType as T;
        match ty {
            T::Directory => tree.dir(&name)?,
            T::Regular if slash => tree.dir(&name)?,
            T::Regular | T::Continuous | T::GNUSparse => {
                let size = entry.size();
                tree.file(&name, &mut entry, size, mode, mtime)?
            }
            T::Symlink | T::Link => {
                let target = entry
                    .link_name()
                    .map_err(|e| tree.read_error(e))?
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                if ty == T::Symlink {
                    tree.symlink(&name, &target)?;
                } else {
                    tree.hard_link(&name, &target)?;
                }
            }
            // A pax global header (git archive writes one) describes the archive, not a member.
            T::XGlobalHeader => {}
            T::Char => return Err(tree.refuse(&name, Refusal::Kind("a character device"))),
            T::Block => return Err(tree.refuse(&name, Refusal::Kind("a block device"))),
            T::Fifo => return Err(tree.refuse(&name, Refusal::Kind("a fifo"))),
            _ => return Err(tree.refuse(&name, Refusal::Kind("an unknown kind of member"))),
        }
    }
    Ok(())
}

fn unpack_zip(file: File, tree: &mut Tree) -> Result<(), ArchiveError> {
    let zip_error = |tree: &Tree, e: zip::result::ZipError| ArchiveError::Zip {
        archive: tree.archive.clone(),
        detail: e.to_string(),
    };
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| zip_error(tree, e))?;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| zip_error(tree, e))?;
        let name = PathBuf::from(member.name().map_err(|e| zip_error(tree, e))?.into_owned());
        if member.is_dir() {
            tree.dir(&name)?;
        } else if member.is_symlink() {
            let mut target = String::new();
            member.read_to_string(&mut target).map_err(|e| tree.read_error(e))?;
            tree.symlink(&name, Path::new(&target))?;
        } else {
            let mode = member.unix_mode().unwrap_or(0o644);
            let size = member.size();
            tree.file(&name, &mut member, size, mode, None)?;
        }
    }
    Ok(())
}

/// The tree being unpacked: what was written, and the links still to make.
struct Tree {
    archive: PathBuf,
    root: PathBuf,
    links: Links,
    files: HashSet<PathBuf>,
    pending: Vec<(PathBuf, PathBuf)>,
    limits: Limits,
    /// Bytes written so far.
    written: u64,
}

impl Tree {
    fn new(archive: &Path, root: &Path, links: Links, limits: Limits) -> Result<Tree, ArchiveError> {
        std::fs::create_dir_all(root).map_err(|source| ArchiveError::Write {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(Tree {
            archive: archive.to_path_buf(),
            root: root.to_path_buf(),
            links,
            files: HashSet::new(),
            pending: Vec::new(),
            limits,
            written: 0,
        })
    }

    fn read_error(&self, source: std::io::Error) -> ArchiveError {
        ArchiveError::Read {
            archive: self.archive.clone(),
            source,
        }
    }

    fn unsupported(&self, compression: &'static str) -> ArchiveError {
        ArchiveError::Unsupported {
            archive: self.archive.clone(),
            compression,
        }
    }

    fn refuse(&self, name: &Path, why: Refusal) -> ArchiveError {
        ArchiveError::Refused {
            archive: self.archive.clone(),
            // The name comes from the archive: escaped, so it cannot fake lines or drive a terminal.
            member: crate::shown::path(name),
            why,
        }
    }

    fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
        move |source| ArchiveError::Write {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The member's path relative to the root: refused when absolute or with `..`.
    fn relative(&self, name: &Path) -> Result<PathBuf, ArchiveError> {
        member_path(name).map_err(|why| self.refuse(name, why))
    }

    fn dir(&mut self, name: &Path) -> Result<(), ArchiveError> {
        let rel = self.relative(name)?;
        let path = self.root.join(rel);
        std::fs::create_dir_all(&path).map_err(Tree::write_error(&path))
    }

    /// Counts `size` more bytes against the limits, refusing `name` past either.
    fn count(&mut self, name: &Path, size: u64, member: u64) -> Result<(), ArchiveError> {
        let l = self.limits;
        let total = self.written.saturating_add(size);
        let (what, size, limit) = match () {
            _ if member > l.member => ("for one member", member, l.member),
            _ if total > l.total => ("for the whole archive", total, l.total),
            _ => {
                self.written = total;
                return Ok(());
            }
        };
        Err(self.refuse(name, Refusal::TooLarge { what, size, limit }))
    }

    fn file(
        &mut self,
        name: &Path,
        data: &mut impl Read,
        declared: u64,
        mode: u32,
        mtime: Option<u64>,
    ) -> Result<(), ArchiveError> {
        let rel = self.relative(name)?;
        if rel.as_os_str().is_empty() {
            return Err(self.refuse(name, Refusal::Empty));
        }
        // What the member says it holds, before a byte is written...
        let before = self.written;
        self.count(name, declared, declared)?;
        self.written = before;
        let path = self.root.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(Tree::write_error(parent))?;
        }
        let mut out = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(if mode & 0o111 != 0 { 0o755 } else { 0o644 })
            .open(&path)
            .map_err(Tree::write_error(&path))?;
        // ... and what it really holds, while streaming: at most one byte past what is left.
        let room = self.limits.member.min(self.limits.total - self.written);
        let copied = std::io::copy(&mut data.take(room.saturating_add(1)), &mut out).map_err(|e| self.read_error(e))?;
        self.count(name, copied, copied)?;
        if let Some(secs) = mtime {
            let _ = out.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        }
        self.files.insert(rel);
        Ok(())
    }

    fn hard_link(&mut self, name: &Path, target: &Path) -> Result<(), ArchiveError> {
        let rel = self.relative(name)?;
        let Some(from) = member_path(target).ok().filter(|f| self.files.contains(f)) else {
            return Err(self.refuse(name, Refusal::HardLinkMissing(crate::shown::path(target))));
        };
        let (src, dest) = (self.root.join(&from), self.root.join(&rel));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(Tree::write_error(parent))?;
        }
        let size = std::fs::metadata(&src).map_or(0, |m| m.len());
        self.count(name, size, size)?;
        std::fs::copy(&src, &dest).map_err(Tree::write_error(&dest))?;
        self.files.insert(rel);
        Ok(())
    }

    fn symlink(&mut self, name: &Path, target: &Path) -> Result<(), ArchiveError> {
        if self.links == Links::Refuse {
            return Err(self.refuse(name, Refusal::LinkNotAllowed));
        }
        let rel = self.relative(name)?;
        let outside = || Refusal::LinkOutside(crate::shown::path(target));
        if rel.as_os_str().is_empty() {
            return Err(self.refuse(name, Refusal::Empty));
        }
        // Lexically first: from the link's directory, the target must stay below the root.
        if !lexically_inside(rel.parent().unwrap_or(Path::new("")), target) {
            return Err(self.refuse(name, outside()));
        }
        self.pending.push((rel, target.to_path_buf()));
        Ok(())
    }

    /// Makes the links, then checks where each really leads (a link through another link can
    /// leave the tree where its text alone does not).
    fn finish(self) -> Result<(), ArchiveError> {
        for (rel, target) in &self.pending {
            if through_link(&self.root, rel) {
                return Err(self.refuse(rel, Refusal::ThroughLink));
            }
            let path = self.root.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(Tree::write_error(parent))?;
            }
            std::os::unix::fs::symlink(target, &path).map_err(Tree::write_error(&path))?;
        }
        let root = std::fs::canonicalize(&self.root).map_err(Tree::write_error(&self.root))?;
        for (rel, target) in &self.pending {
            let dir = rel.parent().map(|p| root.join(p)).unwrap_or_else(|| root.clone());
            if !resolves_inside(&root, &dir, target) {
                return Err(self.refuse(rel, Refusal::LinkOutside(crate::shown::path(target))));
            }
        }
        Ok(())
    }
}

/// `name` as a path below the root: only normal components (and `.`), never absolute or `..`.
fn member_path(name: &Path) -> Result<PathBuf, Refusal> {
    let mut out = PathBuf::new();
    for c in name.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => return Err(Refusal::ParentDir),
            Component::RootDir | Component::Prefix(_) => return Err(Refusal::Absolute),
        }
    }
    Ok(out)
}

/// Whether `target`, read as text from the directory `base` (relative to the root), stays
/// below the root.
fn lexically_inside(base: &Path, target: &Path) -> bool {
    let mut depth = base.components().count();
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            _ => return false,
        }
    }
    true
}

/// Whether a directory on the way from `root` to `rel` is a symbolic link.
fn through_link(root: &Path, rel: &Path) -> bool {
    let mut p = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in &parts[..parts.len().saturating_sub(1)] {
        p.push(c);
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return true;
        }
    }
    false
}

/// Whether `target`, followed from `dir` (canonical, inside `root`) as the kernel would, stays
/// inside `root` (canonical) at every step. A target that does not exist (yet) is accepted
/// when the rest of its path only descends.
pub(crate) fn resolves_inside(root: &Path, dir: &Path, target: &Path) -> bool {
    let mut p = dir.to_path_buf();
    let mut exists = true;
    for c in target.components() {
        match c {
            Component::Normal(n) => {
                p.push(n);
                if exists {
                    match std::fs::symlink_metadata(&p) {
                        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(&p) {
                            Ok(real) => p = real,
                            Err(_) => return false,
                        },
                        Ok(_) => {}
                        Err(_) => exists = false,
                    }
                }
            }
            Component::CurDir => {}
            Component::ParentDir if exists => {
                p.pop();
            }
            _ => return false,
        }
        if !p.starts_with(root) {
            return false;
        }
    }
    true
}

mod limits;
#[cfg(test)]
mod tests;
