//! Whether this sccache can wrap this nvcc: a probe compile of a one-kernel file through sccache
//! (on a throw-away local cache), for the target archs as SASS and the newest as PTX too,
//! before any build relies on it. sccache parses nvcc's `--dryrun` output and replays it, and
//! that output changes between CUDA releases: sccache 0.16 fails on nvcc >= 13.3 with
//! `fatbinary fatal : Could not open input file '<name>.cubin'` (fixed in sccache 0.18:
//! https://github.com/mozilla/sccache/pull/2722), and 0.18 still fails PTX-only targets
//! (https://github.com/mozilla/sccache/issues/2862). A version table would be stale by the
//! next release; a probe is the truth for this pair.
//!
//! It deliberately ignores C and C++ (sccache has wrapped gcc for a decade) and decides nothing:
//! the build leaves CUDA out of the cache when the probe fails, and says why.

use std::path::Path;

use super::Backend;
use super::server::Server;
use crate::arch::Arch;
use crate::process::Cmd;

const KERNEL: &str = "__global__ void kiln_probe(float* x) { x[threadIdx.x] *= 2.0f; }\n";

/// nvcc's `-gencode` flags for `archs`: SASS for each, PTX for the newest.
fn gencode(archs: &[Arch]) -> Vec<String> {
    let sm = |a: &Arch| format!("{}{}", a.major, a.minor);
    let mut flags: Vec<String> = archs
        .iter()
        .map(|a| format!("-gencode=arch=compute_{0},code=sm_{0}", sm(a)))
        .collect();
    if let Some(newest) = archs.iter().max() {
        flags.push(format!("-gencode=arch=compute_{0},code=compute_{0}", sm(newest)));
    }
    flags
}

/// Compiles the probe kernel with `sccache nvcc` in `dir` (created; logs in `dir/probe.log`).
/// `Err` says why sccache cannot wrap this nvcc, in a line.
pub fn cuda(sccache: &Path, nvcc: &str, archs: &[Arch], dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let log = dir.join("probe.log");
    std::fs::write(dir.join("probe.cu"), KERNEL).map_err(|e| format!("cannot write the probe: {e}"))?;
    let server = Server::start(sccache, &Backend::Dir(dir.join("cache")), &log)?;
    let ran = Cmd::new(sccache.display().to_string())
        .arg(nvcc)
        .args(["-c", "probe.cu", "-o", "probe.o"])
        .args(gencode(archs))
        .cwd(dir)
        .env("SCCACHE_SERVER_UDS", server.socket().display().to_string())
        .timeout(std::time::Duration::from_secs(300))
        .run_logged(&log);
    drop(server);
    match ran {
        Ok(()) if dir.join("probe.o").is_file() => Ok(()),
        Ok(()) => Err("the probe compile wrote no object".into()),
        Err(e) => {
            // nvcc's own line (`fatbinary fatal   : Could not open input file ...`) over
            // sccache's (`Compiler killed by signal 1`).
            let cause = e
                .causes
                .iter()
                .chain(&e.tail)
                .find(|l| l.contains("fatal") || l.contains("error"))
                .or(e.tail.last())
                .cloned()
                .unwrap_or_default();
            Err(format!("{} ({cause}; log: {})", e.status, log.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_builds_sass_for_each_arch_and_ptx_for_the_newest() {
        let archs = [Arch { major: 9, minor: 0 }, Arch { major: 12, minor: 0 }];
        assert_eq!(
            gencode(&archs),
            [
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_120,code=sm_120",
                "-gencode=arch=compute_120,code=compute_120"
            ]
        );
    }
}
