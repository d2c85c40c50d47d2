//! The C++ compiler kiln names in `CXX` under `--compile-cache`: one program that runs
//! `sccache <the real compiler> ARGS`. torch's extension builder needs `CXX` to be one program
//! (`get_cxx_compiler()` and `check_compiler_ok_for_platform()`, torch/utils/cpp_extension.py:380
//! in torch 2.11: `shutil.which(CXX)`, then the resolved path must contain a name it accepts:
//! `g++`, `gcc`, `clang++`...; the launcher is named `g++` for that), so `CXX="sccache g++"` is no
//! compiler to it; without this the C++ side of a torch extension was never cached (node 2 of
//! `bench/torchext` on the H200 took 31.9 s of 96.8).
//!
//! The script is the same on every node (the real compiler and sccache come from `KILN_CXX` and
//! `KILN_SCCACHE` in the build's environment). `KILN_CXX` is an executable path (spaces kept) or
//! a command line (`g++ -pthread`, split on blanks). Under the launcher a CMake build's C++
//! compiler is the launcher itself, so the wiring sets no `CMAKE_CXX_COMPILER_LAUNCHER` (sccache
//! would then hash this script, not the real compiler). Where sccache runs it anyway (vLLM's
//! setup.py adds `-DCMAKE_CXX_COMPILER_LAUNCHER=sccache` where sccache is on `PATH`), it runs
//! the real compiler directly: one lookup, keyed by the launcher and, through
//! `SCCACHE_C_CUSTOM_CACHE_BUSTER` (one of the variables sccache hashes: `CACHED_ENV_VARS` in
//! its src/compiler/c.rs), by the text of `KILN_CXX`, not by the compiler's binary.
//! A `KILN_CXX` that is the launcher itself is refused (it would run itself forever).
//!
//! It owns only that script; which builds get it is the wiring's ([`super::Wiring`]).

use std::path::{Path, PathBuf};

/// What the launcher runs when neither the recipe nor the user names a C++ compiler: torch's
/// own default (cpp_extension.py: `os.environ.get('CXX', 'c++')`).
pub const DEFAULT_CXX: &str = "c++";

const SCRIPT: &str = r#"#!/bin/sh
# kiln's C++ compiler under --compile-cache: sccache in front of $KILN_CXX (see kiln's
# src/compile_cache/launcher.rs). Run by sccache itself, it runs the compiler directly.
cxx=${KILN_CXX:-c++}
if [ -x "$cxx" ]; then
  set -- "$cxx" "$@"
else
  set -f
  set -- $cxx "$@"
  set +f
fi
me=$(readlink -f -- "$0")
real=$(command -v -- "$1" 2>/dev/null)
if [ -n "$real" ] && [ "$(readlink -f -- "$real")" = "$me" ]; then
  echo "kiln's C++ launcher: KILN_CXX ($KILN_CXX) is the launcher itself; name the real compiler" >&2
  exit 2
fi
if [ "$(cat /proc/$PPID/comm 2>/dev/null)" = sccache ]; then
  exec "$@"
fi
exec "${KILN_SCCACHE:?KILN_SCCACHE is not set}" "$@"
"#;

/// Where the launcher lives in kiln's cache (named `g++`, a name torch accepts).
pub fn path(cache: &Path) -> PathBuf {
    cache.join("tools").join("launchers").join("g++")
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
        // A compiler path with a space is one program; a command line is split.
        let spaced = dir.path().join("gcc 12");
        std::fs::create_dir_all(&spaced).unwrap();
        let cxx = spaced.join("g++");
        std::fs::write(&cxx, "#!/bin/sh\necho \"real $*\"\n").unwrap();
        std::fs::set_permissions(&cxx, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let run = |kiln_cxx: &std::ffi::OsStr| {
            let out = std::process::Command::new(&fake)
                .arg("run")
                .arg(&launcher)
                .arg("-c")
                .env("KILN_SCCACHE", &fake)
                .env("KILN_CXX", kiln_cxx)
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        };
        assert_eq!(run(cxx.as_os_str()).1, "real -c\n");
        // Itself as the compiler: refused, not a loop.
        let (code, _, err) = run(launcher.as_os_str());
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("is the launcher itself"), "{err}");
        // Without KILN_SCCACHE it says so, and fails.
        let out = std::process::Command::new(&launcher)
            .env_remove("KILN_SCCACHE")
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("KILN_SCCACHE is not set"));
    }
}
