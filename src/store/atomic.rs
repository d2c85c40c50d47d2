//! One way to write a file of kiln's store: the bytes go to a temporary file beside the target
//! (the `tempfile` crate's `NamedTempFile`, so two writers never share one), are synced when the
//! file must survive a power cut, and the temporary file is renamed over the target
//! (`persist`), so a reader sees the old file or the new one, never a part; two concurrent
//! writers each rename a whole file and the last one wins. A temporary file's name carries its
//! writer's pid (`.{name}.{pid}.{random}.tmp`), so that [`sweep`] removes what a killed writer
//! left and never a live one's.
//!
//! It deliberately ignores what the bytes are and whether an old file should be kept.

use std::io::Write;
use std::path::Path;

/// Whether a write must survive a crash of the machine, or only of kiln.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// The file and its directory are synced before the call returns (journals, records that
    /// say what an environment holds, wheel-cache records).
    Durable,
    /// A cache entry that is computed again when lost: renamed into place, not synced.
    Cache,
}

/// Writes `bytes` to `path` as described in the module doc; the directory is made if missing.
pub fn write(path: &Path, bytes: &[u8], sync: Sync) -> std::io::Result<()> {
    write_mode(path, bytes, sync, 0o666)
}

/// [`write`] of a program: mode 0777 less the umask.
pub fn write_executable(path: &Path, bytes: &[u8], sync: Sync) -> std::io::Result<()> {
    write_mode(path, bytes, sync, 0o777)
}

/// Copies the file `from` to `to` the same way, its mode kept, reading it as it goes.
pub fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut src = std::fs::File::open(from)?;
    let mode = src.metadata()?.permissions().mode() & 0o7777;
    let (mut tmp, _) = temporary(to, mode)?;
    std::io::copy(&mut src, &mut tmp)?;
    // The mode of the file copied, as `std::fs::copy` keeps it (the umask does not apply).
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))?;
    crate::crash_point::writing(to);
    tmp.persist(to).map_err(|e| e.error)?;
    Ok(())
}

/// A temporary file beside `path` (the directory made if missing), created with `mode` less
/// the umask as a file written in place would be (not tempfile's 0600), and that directory.
fn temporary(path: &Path, mode: u32) -> std::io::Result<(tempfile::NamedTempFile, std::path::PathBuf)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The writer's pid in the name: what a killed writer left is told from a live one's.
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.{}.", std::process::id()))
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .tempfile_in(dir)?;
    Ok((tmp, dir.to_path_buf()))
}

fn write_mode(path: &Path, bytes: &[u8], sync: Sync, mode: u32) -> std::io::Result<()> {
    let (mut tmp, dir) = temporary(path, mode)?;
    tmp.write_all(bytes)?;
    if sync == Sync::Durable {
        tmp.as_file().sync_all()?;
    }
    crate::crash_point::writing(path);
    tmp.persist(path).map_err(|e| e.error)?;
    if sync == Sync::Durable {
        sync_dir(&dir)?;
    }
    Ok(())
}

/// Removes from `dir` the temporary files of writers that are gone (a kiln killed between
/// writing and renaming leaves one); those of live writers stay. Returns how many went.
pub fn sweep(dir: &Path) -> usize {
    let mut removed = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = writer_of(&name) else { continue };
        // SAFETY: kill(2) with signal 0 sends nothing; it only asks whether the pid exists.
        let gone = pid != std::process::id()
            && unsafe { libc::kill(pid as libc::pid_t, 0) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid of the writer of a temporary file named `.{name}.{pid}.{random}.tmp`.
fn writer_of(file: &str) -> Option<u32> {
    let rest = file.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (rest, _random) = rest.rsplit_once('.')?;
    let (_name, pid) = rest.rsplit_once('.')?;
    pid.parse().ok().filter(|p| *p > 0)
}

/// Syncs a directory, so that the names renamed into it survive a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program keeps its mode (less the umask), a copy the mode of what it copies, and a
    /// copy is whole once it is there (no fixed temporary name two copies could share).
    #[test]
    fn programs_and_copies_get_their_modes_and_leave_no_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("bin/tool");
        write_executable(&prog, b"#!/bin/sh\n", Sync::Cache).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&prog) & 0o111, 0o111 & !umask(), "{:o}", mode(&prog));
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o750)).unwrap();
        let copied = dir.path().join("site/pkg/tool");
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| copy(&prog, &copied).unwrap());
            }
        });
        assert_eq!(mode(&copied), 0o750);
        assert_eq!(std::fs::read(&copied).unwrap(), b"#!/bin/sh\n");
        let left: Vec<_> = std::fs::read_dir(copied.parent().unwrap()).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    /// A temporary file of a writer that is gone is swept; a live writer's, the target and
    /// names of another shape stay.
    #[test]
    fn only_the_temporary_files_of_writers_that_are_gone_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("entry.json"), b"{}", Sync::Cache).unwrap();
        // A pid no process has: above the kernel's pid_max (at most 2^22).
        let dead = dir.path().join(".entry.json.9999999.Ab12Cd.tmp");
        let live = dir
            .path()
            .join(format!(".entry.json.{}.Xy34Zw.tmp", std::process::id()));
        let other = dir.path().join(".entry.json.tmp");
        for f in [&dead, &live, &other] {
            std::fs::write(f, b"part").unwrap();
        }
        assert_eq!(writer_of(".kiln.json.123.Ab12Cd.tmp"), Some(123));
        assert_eq!(writer_of(".entry.json.tmp"), None);
        assert_eq!(sweep(dir.path()), 1);
        assert!(!dead.exists() && live.exists() && other.exists());
        assert!(dir.path().join("entry.json").exists());
    }

    fn umask() -> u32 {
        // SAFETY: umask only swaps the process's mask; it is put back at once.
        let m = unsafe { libc::umask(0o022) };
        unsafe { libc::umask(m) };
        m as u32
    }

    #[test]
    fn concurrent_writers_leave_one_whole_file_and_no_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/owners.json");
        std::thread::scope(|s| {
            for n in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..50 {
                        write(path, &vec![b'a' + n; 64 * 1024], Sync::Cache).unwrap();
                    }
                });
            }
        });
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got.len(), 64 * 1024);
        assert!(got.iter().all(|b| *b == got[0]), "a file mixed from two writers");
        write(&path, b"last", Sync::Durable).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"last");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub")).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "temporary files left: {names:?}");
    }
}
