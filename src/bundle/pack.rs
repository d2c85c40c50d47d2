//! Writing a bundle: the lockfile and the cache entries it needs packed into one tar, into
//! `<out>.partial` renamed into place when whole, each entry as the cache holds it (no owners,
//! the executable bit kept, a git mirror's config without credentials), watched as a
//! [`Task::Pack`](crate::watch::Task::Pack) in bytes.
//!
//! It ignores which entries a lock needs (`super::contents`) and how a bundle is split
//! (`super::parts`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{BundleError, Contents, LOCK_IN_BUNDLE};
use crate::store::archive;

/// Writes the bundle: the lockfile's text as `kiln.lock`, then the cache entries (each a
/// directory, with everything below it), into `<out>.partial`, renamed to `out` when complete.
/// The directory `out` names is made if missing. `watch` sees a [`Task::Pack`] in bytes of the
/// files packed.
///
/// [`Task::Pack`]: crate::watch::Task::Pack
pub fn write(
    out: &Path,
    lock_text: &str,
    contents: &Contents,
    cache: &Path,
    watch: &crate::watch::Watch,
) -> Result<(), BundleError> {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    let partial = out.with_file_name(name);
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| BundleError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let subject = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut task = watch.start(
        crate::watch::Task::Pack,
        &subject,
        format!("{} entries", contents.entries.len()),
    );
    let total: u64 = contents
        .entries
        .iter()
        .map(|e| crate::cache_dir::size(&cache.join(e)))
        .sum();
    let mut packed = Packed {
        done: 0,
        total,
        task: &mut task,
    };
    let result = write_tar(&partial, lock_text, contents, cache, &mut packed).and_then(|()| {
        std::fs::rename(&partial, out).map_err(|source| BundleError::Write {
            path: out.to_path_buf(),
            source,
        })
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    task.finish(result.is_ok());
    result
}

/// How far the packing is.
struct Packed<'a> {
    done: u64,
    total: u64,
    task: &'a mut crate::watch::Running,
}

impl Packed<'_> {
    fn add(&mut self, bytes: u64) {
        self.done += bytes;
        self.task.progress(self.done, Some(self.total.max(self.done)));
    }
}

fn write_tar(
    partial: &Path,
    lock_text: &str,
    contents: &Contents,
    cache: &Path,
    packed: &mut Packed,
) -> Result<(), BundleError> {
    let failed = |source| BundleError::Write {
        path: partial.to_path_buf(),
        source,
    };
    let file = File::create(partial).map_err(failed)?;
    let mut tar = tar::Builder::new(BufWriter::new(file));
    let mut header = tar::Header::new_gnu();
    header.set_mode(0o644);
    header.set_size(lock_text.len() as u64);
    header.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    tar.append_data(&mut header, LOCK_IN_BUNDLE, lock_text.as_bytes())
        .map_err(failed)?;
    for entry in &contents.entries {
        append_tree(&mut tar, cache, Path::new(entry), packed).map_err(|e| match e {
            Appending::Io(source) => failed(source),
            Appending::NotAFile(p) => BundleError::NotAFile(p),
        })?;
    }
    let mut out = tar.into_inner().map_err(failed)?;
    out.flush().map_err(failed)?;
    out.get_ref().sync_all().map_err(failed)
}

enum Appending {
    Io(std::io::Error),
    NotAFile(PathBuf),
}

impl From<std::io::Error> for Appending {
    fn from(e: std::io::Error) -> Self {
        Appending::Io(e)
    }
}

/// Appends `rel` (relative to `cache`) and, for a directory, everything below it in name order;
/// no owners, mode 0o755 or 0o644 by the executable bit, mtimes kept.
fn append_tree<W: Write>(
    tar: &mut tar::Builder<W>,
    cache: &Path,
    rel: &Path,
    packed: &mut Packed,
) -> Result<(), Appending> {
    let path = cache.join(rel);
    let meta = std::fs::symlink_metadata(&path)?;
    let mut header = tar::Header::new_gnu();
    header.set_metadata_in_mode(&meta, tar::HeaderMode::Deterministic);
    header.set_mtime(meta.mtime().max(0) as u64);
    if meta.is_dir() {
        tar.append_data(&mut header, rel, std::io::empty())?;
        let mut names: Vec<_> = std::fs::read_dir(&path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for name in names {
            append_tree(tar, cache, &rel.join(name), packed)?;
        }
    } else if meta.is_file() && rel.starts_with("git") && rel.file_name().is_some_and(|n| n == "config") {
        // A mirror written by an older kiln may name its URL with a credential: it never travels.
        let mut text = String::new();
        std::io::Read::read_to_string(&mut archive::open_regular(&path)?, &mut text)?;
        let text = crate::process::secrets::strip_urls(&text);
        header.set_size(text.len() as u64);
        tar.append_data(&mut header, rel, text.as_bytes())?;
        packed.add(meta.len());
    } else if meta.is_file() {
        tar.append_data(&mut header, rel, archive::open_regular(&path)?)?;
        packed.add(meta.len());
    } else {
        return Err(Appending::NotAFile(path));
    }
    Ok(())
}
