//! One writer per environment and per wheel-cache entry: advisory locks (`flock(2)` through
//! std's `File::lock`), released by the kernel when the holder exits however it exits, so a
//! `kill -9` never leaves a stale lock behind.
//!
//! An environment's lock is keyed by the environment itself, not by kiln's cache: it is
//! `<prefix>/.kiln-env.lock`, the prefix being the directory above the interpreter's (`<venv>`
//! for `<venv>/bin/python`, that directory resolved but not the interpreter itself: every venv's
//! `python` is a link to the same binary), so two kilns with different `--cache-dir` on one venv
//! exclude each other. Only where the prefix cannot be written (a system Python kiln may only
//! read) does the lock fall back to the cache, `locks/env-<key>.lock` (the key a hash of the
//! prefix). A wheel-cache entry being built has `locks/wheel-<cache key>.lock` in the cache, a
//! source being downloaded `locks/source-<sha256>.lock`.
//! Each holds who holds it ([`Holder`]: pid, command line, since when), written once the lock is
//! taken, so that a kiln that has to wait can say for whom.
//!
//! Every kiln command but `kiln cache clean` also says that it is using a cache: it holds
//! `locks/live-<pid>.lock` for its whole run ([`live`]), registered under a shared lock on
//! `locks/clean.lock`, which `kiln cache clean` holds exclusively while it cleans
//! ([`cleaning`]): so a clean sees every kiln that started before it ([`live_kilns`]), and a
//! kiln that starts during a clean waits until it is over.
//!
//! It deliberately ignores readers of an environment: `doctor` and `plan` take no
//! environment lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Who holds a lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    /// Its command line.
    pub command: String,
    /// When it took the lock, in seconds since the epoch.
    pub since: u64,
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `pid 4242 (kiln install fixture-pure), since 12:03:04 UTC, 5 s ago`.
impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let day = self.since % 86_400;
        let (h, m, s) = (day / 3600, day % 3600 / 60, day % 60);
        let ago = now().saturating_sub(self.since);
        write!(
            f,
            "pid {} ({}), since {h:02}:{m:02}:{s:02} UTC, {ago} s ago",
            self.pid, self.command
        )
    }
}

/// A lock another kiln holds.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{what} is being changed by another kiln: {holder}; it was not waited for (--no-wait)")]
    Busy { what: String, holder: Holder },
    #[error("cannot lock {}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
}

/// A lock held; released when dropped (or when kiln dies).
#[derive(Debug)]
pub struct Held {
    _file: File,
    pub path: PathBuf,
}

/// The environment of `python`: the directory above the interpreter's, resolved (`<venv>` for
/// `<venv>/bin/python` and `<venv>/bin/../bin/python3` alike).
pub fn env_prefix(python: &Path) -> PathBuf {
    let abs = std::path::absolute(python).unwrap_or_else(|_| python.to_path_buf());
    let dir = abs
        .parent()
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf()));
    match dir {
        Some(dir) => dir.parent().map_or(dir.clone(), Path::to_path_buf),
        None => abs,
    }
}

/// A short key for the environment of `python` (names its journal and its fallback lock).
pub fn env_key(python: &Path) -> String {
    let hash = hex::encode(Sha256::digest(env_prefix(python).to_string_lossy().as_bytes()));
    format!("env-{}", &hash[..16])
}

/// The lock file of the environment of `python`: in the environment where kiln may write
/// there, else in the cache (see the module doc).
pub fn env_lock(cache: &Path, python: &Path) -> PathBuf {
    let prefix = env_prefix(python);
    if writable(&prefix) {
        return prefix.join(".kiln-env.lock");
    }
    cache.join("locks").join(format!("{}.lock", env_key(python)))
}

fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path; access(2) only reads it.
    dir.is_dir() && unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0
}

/// The lock file of the wheel-cache entry `key`.
pub fn entry_lock(cache: &Path, key: &str) -> PathBuf {
    cache.join("locks").join(format!("wheel-{key}.lock"))
}

/// The lock file of the source download `sha256` (`sources/<sha256>/`): one kiln downloads
/// it, another waits and then finds it whole.
pub fn source_lock(cache: &Path, sha256: &str) -> PathBuf {
    cache.join("locks").join(format!("source-{sha256}.lock"))
}

/// The holder written in a lock file (`None` while it is being written or when unreadable).
pub fn holder(path: &Path) -> Option<Holder> {
    crate::state::read_json(path, crate::state::RECORD_LIMIT, "")
        .ok()
        .flatten()
}

/// Takes the lock at `path` for `what` (`the environment /v/bin/python`). When another kiln
/// holds it: with `wait`, tells `waiting` who and blocks until it is free; without, fails with
/// who holds it.
pub fn take(path: &Path, what: &str, wait: bool, waiting: impl FnOnce(&Holder)) -> Result<Held, LockError> {
    let io = |error| LockError::Io {
        path: path.to_path_buf(),
        error,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = Vec::new();
            let _ = file.read_to_end(&mut text);
            let holder = serde_json::from_slice(&text).unwrap_or(Holder {
                pid: 0,
                command: "unknown".into(),
                since: now(),
            });
            if !wait {
                return Err(LockError::Busy {
                    what: what.to_string(),
                    holder,
                });
            }
            waiting(&holder);
            file.lock().map_err(io)?;
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    let me = Holder {
        pid: std::process::id(),
        command: crate::process::secrets::mask_urls(&std::env::args().collect::<Vec<_>>().join(" ")).into_owned(),
        since: now(),
    };
    let text = serde_json::to_vec(&me).unwrap_or_default();
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    file.write_all(&text).map_err(io)?;
    Ok(Held {
        _file: file,
        path: path.to_path_buf(),
    })
}

/// Takes the lock at `path` only when nobody holds it: `None` when another kiln does.
pub fn try_take(path: &Path) -> Option<Held> {
    take(path, "", false, |_| {}).ok()
}

/// Says that this kiln uses `cache` until the returned lock is dropped (see the module doc);
/// waits while a `kiln cache clean` runs. `None` when the cache cannot be written (nothing of
/// this kiln's can then be there to clean).
pub fn live(cache: &Path) -> Option<Held> {
    let gate = open(&cache.join("locks").join("clean.lock")).ok()?;
    gate.lock_shared().ok()?;
    let held = take(
        &cache.join("locks").join(format!("live-{}.lock", std::process::id())),
        "this kiln",
        true,
        |_| {},
    )
    .ok();
    drop(gate);
    held
}

/// Holds `locks/clean.lock` exclusively: no kiln starts using `cache` until it is dropped.
pub fn cleaning(cache: &Path) -> Result<File, LockError> {
    let path = cache.join("locks").join("clean.lock");
    let io = |error| LockError::Io {
        path: path.clone(),
        error,
    };
    let gate = open(&path).map_err(io)?;
    gate.lock().map_err(io)?;
    Ok(gate)
}

/// The kilns other than this one that are using `cache` now ([`live`]); the lock files of
/// kilns that are gone are removed.
pub fn live_kilns(cache: &Path) -> Vec<Holder> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir(cache.join("locks")).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("live-")
            .and_then(|n| n.strip_suffix(".lock"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        match try_take(&e.path()) {
            // Free: that kiln is gone.
            Some(_free) => {
                let _ = std::fs::remove_file(e.path());
            }
            None => out.push(holder(&e.path()).unwrap_or(Holder {
                pid,
                command: "kiln".into(),
                since: now(),
            })),
        }
    }
    out.sort_by_key(|h| h.pid);
    out
}

fn open(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_says_who_holds_it_and_frees_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("v/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let cache = dir.path().join("cache-a");
        let path = env_lock(&cache, &bin.join("python"));
        // Keyed by the environment: another path to it, or another cache, is the same lock.
        assert_eq!(path, dir.path().join("v/.kiln-env.lock"));
        assert_eq!(path, env_lock(&dir.path().join("cache-b"), &bin.join("../bin/python3")));
        std::fs::create_dir_all(dir.path().join("w/bin")).unwrap();
        assert_ne!(path, env_lock(&cache, &dir.path().join("w/bin/python")));
        assert_eq!(env_key(&bin.join("python")), env_key(&bin.join("../bin/python")));
        let held = take(&path, "the environment /v", false, |_| panic!("free")).unwrap();
        let who = holder(&path).unwrap();
        assert_eq!(who.pid, std::process::id());
        // flock locks belong to the open file: a second open in this process is another holder.
        let busy = take(&path, "the environment /v", false, |_| {}).unwrap_err();
        let text = busy.to_string();
        assert!(
            text.starts_with(&format!(
                "the environment /v is being changed by another kiln: pid {}",
                who.pid
            )),
            "{text}"
        );
        assert!(try_take(&path).is_none());
        drop(held);
        assert!(try_take(&path).is_some());
    }
}
