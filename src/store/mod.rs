//! The store: the parts of kiln's cache and of an environment that kiln keeps itself, how their
//! files are written, and what is checked before what is there is trusted. [`atomic`] is the one
//! way a state file is written (a temporary file in the same directory, synced where it
//! matters, renamed over the old one; what a killed writer left is swept); [`wheels`] is the
//! wheel cache, every entry bound to what it is for; [`wheel`] checks that a wheel file is what a
//! wheel-cache key says it is (its distribution name and version, its METADATA, every file
//! against its RECORD hash), for what kiln keeps, takes and receives from bundles; [`aot`] is the
//! cache of modules compiled ahead of time; [`locks`] the cache's and the environments' locks;
//! [`snapshot`] the hard-link copy of an environment a run rolls back to, [`backup`] the copy
//! of one distribution's files, [`journal`] what a step is about to change (recovered after a
//! kill); [`archive`] unpacks sdists and bundles into the cache; [`mirror`] is the git mirrors'
//! configuration; [`record`] reads a distribution's RECORD.
//!
//! It deliberately ignores when entries are made or used: fetching sources and mirroring git
//! repositories (`apply/source`, through [`archive`] and [`mirror`]), memory records
//! (`apply/memory.rs`, through [`atomic`]), probe and JIT records
//! (`probe/`, `session/jit.rs`, through [`atomic`]); which bundled entries may come in
//! (`bundle/check.rs`) and what `cache clean` may remove (`cache_dir.rs`).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

pub mod aot;
pub mod archive;
pub mod atomic;
pub mod backup;
pub mod journal;
pub mod locked_wheel;
pub mod locks;
pub mod mirror;
pub mod record;
pub mod snapshot;
pub mod wheel;
pub mod wheels;

/// The sha256 of the regular file `path`, in hex (a fifo or a directory is an error, never
/// waited on).
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let with_path = |e: std::io::Error| std::io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display()));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(with_path)?;
    if !f.metadata().map_err(with_path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(with_path)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// A distribution name in its normalized form (`pep508_rs::PackageName`, the rule of
/// <https://packaging.python.org/en/latest/specifications/name-normalization/>): `Flash_Attn`
/// and `flash.attn` are `flash-attn`. A string that is no valid distribution name is kept as
/// written, so it matches nothing installed.
pub fn normalize(name: &str) -> String {
    name.parse::<pep508_rs::PackageName>()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| name.to_string())
}

/// Moves a finished file or directory (a checked download, a checked bundle entry) to its place
/// in the cache with one rename, its parent made if missing; an entry already there is kept and
/// `from` left where it is (`Ok(false)`). `from` must be on the cache's file system.
pub fn place(from: &Path, to: &Path) -> std::io::Result<bool> {
    if to.exists() {
        return Ok(false);
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::crash_point::writing(to);
    std::fs::rename(from, to)?;
    Ok(true)
}

/// A name for this moment of this process: seconds since the epoch and the process id (a run's
/// logs, a quarantined entry).
pub fn stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{secs}-{}", std::process::id())
}
