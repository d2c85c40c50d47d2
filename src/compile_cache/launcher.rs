//! The C++ compiler kiln names in `CXX` under `--compile-cache`: one program that runs
//! `sccache <the real compiler> ARGS`. torch's extension builder needs `CXX` to be one program
//! (`get_cxx_compiler()` and `check_compiler_ok_for_platform()`, torch/utils/cpp_extension.py:380
//! in torch 2.11: `shutil.which(CXX)`, then the resolved path must name a known compiler, which
//! `.../c++` does), so `CXX="sccache g++"` is no compiler to it; without this the C++ side of a
//! torch extension was never cached (node 2 of `bench/torchext` on the H200 took 31.9 s of 96.8).
//!
//! The script is the same on every node (the real compiler and sccache come from `KILN_CXX` and
//! `KILN_SCCACHE` in the build's environment), so its content is no part of any cache key. Where
//! sccache itself runs it (a CMake launcher in front of `CXX`, which kiln also sets, or vLLM's
//! setup.py adding one where sccache is on `PATH`), it runs the real compiler directly: one
//! cache lookup per translation unit, not two.
//!
//! It owns only that script; which builds get it is the wiring's ([`super::Wiring`]).

use std::path::{Path, PathBuf};

/// What the launcher runs when neither the recipe nor the user names a C++ compiler: torch's
/// own default (cpp_extension.py: `os.environ.get('CXX', 'c++')`).
pub const DEFAULT_CXX: &str = "c++";

const SCRIPT: &str = r#"#!/bin/sh
# kiln's C++ compiler under --compile-cache: sccache in front of $KILN_CXX (see kiln's
# src/compile_cache/launcher.rs). Run by sccache itself, it runs the compiler directly.
if [ "$(cat /proc/$PPID/comm 2>/dev/null)" = sccache ]; then
  exec ${KILN_CXX:-c++} "$@"
fi
exec "${KILN_SCCACHE:?KILN_SCCACHE is not set}" ${KILN_CXX:-c++} "$@"
"#;

/// Where the launcher lives in kiln's cache (named `c++`, a name torch accepts).
pub fn path(cache: &Path) -> PathBuf {
    cache.join("tools").join("launchers").join("c++")
}

/// Writes the launcher where [`path`] says, unless it is there as it should be.
pub fn ensure(cache: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let to = path(cache);
    if std::fs::read_to_string(&to).is_ok_and(|s| s == SCRIPT) && super::executable(&to) {
        return Ok(to);
    }
    let dir = to.parent().expect("the launcher has a directory");
    let fail = |e: std::io::Error| format!("cannot write the C++ launcher {}: {e}", to.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    std::io::Write::write_all(&mut tmp, SCRIPT.as_bytes()).map_err(fail)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o755))
        .map_err(fail)?;
    tmp.persist(&to).map_err(|e| fail(e.error))?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_runs_the_compiler_through_sccache_and_directly_under_sccache() {
        let dir = tempfile::tempdir().unwrap();
        let launcher = ensure(dir.path()).unwrap();
        assert_eq!(ensure(dir.path()).unwrap(), launcher, "written once");
        // A stand-in sccache (its process is named `sccache`) that says how it was called, or
        // with `run` runs the rest as its child, as sccache runs a compiler.
        let fake = dir.path().join("sccache");
        std::fs::write(
            &fake,
            "#!/bin/sh\nif [ \"$1\" = run ]; then shift; \"$@\"; exit; fi\necho \"sccache $*\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let out = std::process::Command::new(&launcher)
            .args(["-c", "x.cpp"])
            .env("KILN_SCCACHE", &fake)
            .env("KILN_CXX", "echo g++")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "sccache echo g++ -c x.cpp\n");
        // Under sccache (a CMake launcher in front of it): the compiler itself, no second lookup.
        let out = std::process::Command::new(&fake)
            .arg("run")
            .arg(&launcher)
            .args(["-c", "x.cpp"])
            .env("KILN_SCCACHE", &fake)
            .env("KILN_CXX", "echo g++")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "g++ -c x.cpp\n");
        // Without KILN_SCCACHE it says so, and fails.
        let out = std::process::Command::new(&launcher)
            .env_remove("KILN_SCCACHE")
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("KILN_SCCACHE is not set"));
    }
}
