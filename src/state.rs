//! Reading kiln's own state files defensively: the lock, the probe cache, JIT and memory
//! records, install journals, the owners cache. Every such read goes through [`read`] (or
//! [`read_json`]): the file is opened without blocking (a fifo never hangs kiln) and read only
//! when it is a regular file, no larger than its limit (a 2 GiB sparse file is refused from its
//! size, never read), and a file of the wrong shape is an error that names the file and the fix.
//!
//! It deliberately ignores what the files mean (each caller decides whether a bad file is an
//! error to stop on, as a journal is, or a cache entry to ignore and write again) and files
//! that are not kiln's own (models, recipes).

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Limits for the kinds of state file: a lock and a journal's file list may be large; a record
/// is small.
pub const LOCK_LIMIT: u64 = 16 << 20;
pub const CACHE_LIMIT: u64 = 64 << 20;
pub const RECORD_LIMIT: u64 = 1 << 20;

/// A state file that cannot be read as it is.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{}: it is {kind}, not a regular file; {fix}", path.display())]
    NotAFile {
        path: PathBuf,
        kind: &'static str,
        fix: String,
    },
    #[error("{}: it is {size} bytes, over the {limit}-byte limit for this file; {fix}", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
        fix: String,
    },
    #[error("cannot read {}: {error}; {fix}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
        fix: String,
    },
    #[error("{}: not what kiln writes there ({detail}); {fix}", path.display())]
    Shape { path: PathBuf, detail: String, fix: String },
}

impl StateError {
    /// The file it is about.
    pub fn path(&self) -> &Path {
        match self {
            StateError::NotAFile { path, .. }
            | StateError::TooLarge { path, .. }
            | StateError::Io { path, .. }
            | StateError::Shape { path, .. } => path,
        }
    }
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a fifo"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// The bytes of the state file `path`: `Ok(None)` when there is none; an error for anything
/// but a regular file of at most `limit` bytes. `fix` says what the user can do (it ends the
/// error's text).
pub fn read(path: &Path, limit: u64, fix: &str) -> Result<Option<Vec<u8>>, StateError> {
    let io = |error| StateError::Io {
        path: path.to_path_buf(),
        error,
        fix: fix.to_string(),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
            return Err(StateError::NotAFile {
                path: path.to_path_buf(),
                kind: "a directory",
                fix: fix.to_string(),
            });
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(StateError::NotAFile {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
            fix: fix.to_string(),
        });
    }
    if meta.len() > limit {
        return Err(StateError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit,
            fix: fix.to_string(),
        });
    }
    let mut bytes = Vec::new();
    // A file that grows while it is read stops at the limit, and is then too large.
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(StateError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit,
            fix: fix.to_string(),
        });
    }
    Ok(Some(bytes))
}

/// The state file `path` as JSON of type `T` ([`read`]; a wrong shape names the file, the line
/// and column, and `fix`).
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path, limit: u64, fix: &str) -> Result<Option<T>, StateError> {
    let Some(bytes) = read(path, limit, fix)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| StateError::Shape {
        path: path.to_path_buf(),
        detail: e.to_string(),
        fix: fix.to_string(),
    })
}

/// A cache entry as JSON: `None` when it is absent or cannot be read as it is (a cache entry
/// is written again; it never stops kiln).
pub fn cached_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    read_json(path, CACHE_LIMIT, "").ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_their_limit_are_read_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("a.json");
        std::fs::write(&good, "[1, 2]").unwrap();
        let v: Option<Vec<u32>> = read_json(&good, 100, "remove it").unwrap();
        assert_eq!(v, Some(vec![1, 2]));
        assert!(read(&dir.path().join("none"), 100, "").unwrap().is_none());

        let e = read(dir.path(), 100, "remove it").unwrap_err();
        assert!(
            e.to_string()
                .contains("it is a directory, not a regular file; remove it"),
            "{e}"
        );

        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path; mkfifo(3) only reads it.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo, 100, "remove it").unwrap_err();
        assert!(e.to_string().contains("it is a fifo"), "{e}");

        // A sparse 2 GiB file is refused from its size, not read.
        let big = dir.path().join("big");
        std::fs::File::create(&big).unwrap().set_len(2 << 30).unwrap();
        let e = read(&big, LOCK_LIMIT, "remove it").unwrap_err();
        assert!(matches!(e, StateError::TooLarge { size, .. } if size == 2 << 30), "{e}");

        std::fs::write(&good, "{\"a\": 1}").unwrap();
        let e = read_json::<Vec<u32>>(&good, 100, "remove it").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("{}: not what kiln writes there (", good.display())),
            "{text}"
        );
        assert!(
            text.contains("line 1 column") && text.ends_with("; remove it"),
            "{text}"
        );
        assert_eq!(e.path(), good);
        assert!(cached_json::<Vec<u32>>(&good).is_none());
    }
}
