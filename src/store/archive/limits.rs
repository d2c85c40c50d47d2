//! What an archive may cost before it is read: its size limits, and the rule that only a
//! regular file is opened for reading (a fifo would make a read wait forever). It
//! deliberately ignores what the archive holds (that is [`super`]'s job).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// How many bytes an archive may unpack to: per member, and in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub member: u64,
    pub total: u64,
}

impl Limits {
    /// For a compressed archive (an sdist): 4 GiB a member, 16 GiB in all, far above any
    /// sdist on PyPI and far below a decompression bomb.
    pub const COMPRESSED: Limits = Limits {
        member: 4 << 30,
        total: 16 << 30,
    };

    /// For a plain tar of `len` bytes: its members hold at most what the file does.
    pub fn plain(len: u64) -> Limits {
        Limits {
            member: len,
            total: len,
        }
    }
}

/// Opens `path` for reading only if it is a regular file: a fifo, a device or a socket is an
/// error, never a read that waits forever (it is opened without blocking, then looked at).
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(f)
}
