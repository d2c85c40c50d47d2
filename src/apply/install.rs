//! Installing wheels into the target environment, and putting it back exactly as it was when a
//! step fails: before kiln replaces a distribution it backs up every file its `RECORD` lists
//! (`crate::store::backup`); on failure it uninstalls what it installed and copies those back.
//!
//! Installs and build requirements go through `uv pip`: uv on PATH, else the uv kiln brings from
//! its PyPI wheel (pinned below by version and sha256) into `<cache>/tools/uv-<v>/uv`; `python -m
//! pip` only where neither can be had (offline before kiln ever brought uv, an architecture with
//! no uv wheel, `KILN_NO_UV`). uv is told to trust the system's certificate store (as kiln's own
//! downloads do) and is given pip's index variables when only those are set. kiln never edits
//! site-packages itself except to restore a backup. Offline, a local directory of wheels (the
//! wheelhouse a bundle brings) is the only place third-party wheels come from. A kiln killed
//! between backup and proof is put back by the next one, from the journal (`crate::store::journal`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::download::pinned::PinnedWheel;
use crate::process::Cmd;

/// The uv kiln brings when none is on `PATH`: 0.13.9, the newest on PyPI (sha256 from
/// https://pypi.org/simple/uv/); the wheel holds the static binary as
/// `uv-0.13.9.data/scripts/uv`.
pub const UV: PinnedWheel = PinnedWheel {
    name: "uv",
    version: "0.13.9",
    wheels: &[
        (
            "x86_64",
            "https://files.pythonhosted.org/packages/3d/aa/26d64642d808de4a652579ef950d7cd2d37f080a8babf9c67c6b75fc4c3f/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19",
        ),
        (
            "aarch64",
            "https://files.pythonhosted.org/packages/57/15/94b6cd62ac3ff6550288328e8035288875197cbc183f51554b266a69877b/uv-0.13.9-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64.whl",
            "5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe",
        ),
    ],
};

/// The program that installs wheels, and whether it may reach a package index.
#[derive(Debug, Clone)]
pub struct Installer {
    tool: Tool,
    offline: bool,
    find_links: Option<PathBuf>,
    /// Why pip installs although uv was wanted, until a caller has said so once.
    fallback: Option<(String, Arc<AtomicBool>)>,
}

#[derive(Debug, Clone)]
enum Tool {
    Uv(PathBuf),
    Pip,
}

impl Installer {
    /// uv when it is on PATH (and `KILN_NO_UV` is unset), else pip.
    pub fn detect() -> Installer {
        let tool = match which::which("uv") {
            Ok(uv) if std::env::var_os("KILN_NO_UV").is_none() => Tool::Uv(uv),
            _ => Tool::Pip,
        };
        Installer {
            tool,
            offline: false,
            find_links: None,
            fallback: None,
        }
    }

    /// What a run installs with: uv on PATH, else kiln's uv under `cache` (brought from PyPI
    /// when it is not there yet and `offline` is not set), else pip, with the reason kept for
    /// [`Installer::fallback`]. `KILN_NO_UV` asks for pip. `watch` sees uv's download.
    pub fn for_cache(cache: &Path, offline: bool, watch: &crate::watch::Watch) -> Installer {
        let mut i = Installer::detect().offline(offline);
        if std::env::var_os("KILN_NO_UV").is_some() || matches!(i.tool, Tool::Uv(_)) {
            return i;
        }
        match watch.download("uv", &format!("uv {} wheel", UV.version), |p| {
            UV.ensure(cache, offline, p)
        }) {
            Ok(uv) => i.tool = Tool::Uv(uv),
            Err(why) => {
                let text = format!(
                    "installing with pip, which is slower: uv is not on PATH and kiln cannot bring uv {} ({why})",
                    UV.version
                );
                i.fallback = Some((text, Arc::new(AtomicBool::new(false))));
            }
        }
        i
    }

    /// Why pip installs although uv was wanted; `Some` only to the first caller, so that a run
    /// says it once.
    pub fn fallback(&self) -> Option<&str> {
        let (why, said) = self.fallback.as_ref()?;
        (!said.swap(true, Ordering::Relaxed)).then_some(why.as_str())
    }

    /// No index: uv installs from its own cache (`--offline`), pip only local files (`--no-index`).
    pub fn offline(mut self, offline: bool) -> Installer {
        self.offline = offline;
        self
    }

    /// Offline, wheels are also taken from `dir` (`--find-links`): with it, uv no longer reads its
    /// index cache (`--no-index`), so what is installed comes from that directory alone.
    pub fn find_links(mut self, dir: Option<PathBuf>) -> Installer {
        self.find_links = dir;
        self
    }

    /// Whether one call can install wheels and add only the dependencies missing
    /// ([`Installer::install_with_missing`]).
    pub fn adds_missing_in_one_call(&self) -> bool {
        matches!(self.tool, Tool::Uv(_))
    }

    pub fn name(&self) -> &'static str {
        match (&self.tool, self.offline) {
            (Tool::Uv(_), false) => "uv pip",
            (Tool::Uv(_), true) => "uv pip --offline",
            (Tool::Pip, false) => "pip",
            (Tool::Pip, true) => "pip --no-index",
        }
    }

    fn no_index(&self, c: Cmd) -> Cmd {
        if !self.offline {
            return c;
        }
        let c = match (&self.tool, &self.find_links) {
            (Tool::Uv(_), None) => c.arg("--offline"),
            (Tool::Uv(_), Some(_)) => c.args(["--offline", "--no-index"]),
            (Tool::Pip, _) => c.arg("--no-index"),
        };
        match &self.find_links {
            Some(dir) => c.arg("--find-links").arg(dir.display().to_string()),
            None => c,
        }
    }

    /// `install` of `what` (wheel paths or requirements), replacing what is there.
    pub fn install(
        &self,
        python: &Path,
        what: &[String],
        deps: bool,
        constraints: Option<&Path>,
        index_url: Option<&str>,
    ) -> Cmd {
        let py = python.display().to_string();
        let mut c = match &self.tool {
            Tool::Uv(uv) => uv_cmd(uv).args(["pip", "install", "--python", py.as_str(), "--reinstall"]),
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "install", "--force-reinstall", "--no-input"]),
        };
        c = self.no_index(c);
        if !deps {
            c = c.arg("--no-deps");
        }
        if let Some(cons) = constraints {
            c = c.arg("--constraint").arg(cons.display().to_string());
        }
        if let Some(u) = index_url {
            c = c.arg("--index-url").arg(u);
        }
        c.args(what.iter().cloned())
    }

    /// With uv, one call that does what [`Installer::install`] (`what` alone, `dists` replaced)
    /// and then [`Installer::install_missing`] do: `--reinstall-package DIST` replaces only
    /// each of `dists`, and what they need is added only where missing, within `constraints`.
    /// pip has no such switch (`--force-reinstall` reinstalls every dependency too): `None`, and
    /// the caller makes the two calls.
    pub fn install_with_missing(
        &self,
        python: &Path,
        what: &[String],
        dists: &[&str],
        constraints: &Path,
        index_url: Option<&str>,
    ) -> Option<Cmd> {
        let Tool::Uv(uv) = &self.tool else { return None };
        let py = python.display().to_string();
        let mut c = uv_cmd(uv).args(["pip", "install", "--python", py.as_str()]);
        for d in dists {
            c = c.arg("--reinstall-package").arg(*d);
        }
        c = self.no_index(c);
        c = c.arg("--constraint").arg(constraints.display().to_string());
        if let Some(u) = index_url {
            c = c.arg("--index-url").arg(u);
        }
        Some(c.args(what.iter().cloned()))
    }

    /// `install` of what `what` needs and the environment lacks (its runtime dependencies),
    /// without reinstalling anything present, within `constraints`.
    pub fn install_missing(&self, python: &Path, what: &[String], constraints: &Path, index_url: Option<&str>) -> Cmd {
        let py = python.display().to_string();
        let mut c = match &self.tool {
            Tool::Uv(uv) => uv_cmd(uv).args(["pip", "install", "--python", py.as_str()]),
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "install", "--no-input"]),
        };
        c = self.no_index(c);
        c = c.arg("--constraint").arg(constraints.display().to_string());
        if let Some(u) = index_url {
            c = c.arg("--index-url").arg(u);
        }
        c.args(what.iter().cloned())
    }

    /// Installs `reqs` into a private directory (`--target`), for build-time requirements.
    pub fn install_target(&self, python: &Path, reqs: &[String], target: &Path) -> Cmd {
        let py = python.display().to_string();
        let t = target.display().to_string();
        let c = match &self.tool {
            Tool::Uv(uv) => uv_cmd(uv).args(["pip", "install", "--python", py.as_str(), "--target", t.as_str()]),
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "install", "--no-input", "--target", t.as_str()]),
        };
        self.no_index(c).args(reqs.iter().cloned())
    }

    pub fn uninstall(&self, python: &Path, dist: &str) -> Cmd {
        let py = python.display().to_string();
        match &self.tool {
            Tool::Uv(uv) => uv_cmd(uv).args(["pip", "uninstall", "--python", py.as_str(), dist]),
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "uninstall", "-y", dist]),
        }
    }
}

/// `uv` with what kiln's environment says about certificates and indexes: the system's
/// certificate store (`UV_SYSTEM_CERTS`, `UV_NATIVE_TLS` for uv before 0.9) unless the user chose,
/// and pip's `PIP_INDEX_URL` / `PIP_EXTRA_INDEX_URL` where uv's own variables are unset.
pub fn uv_cmd(uv: &Path) -> Cmd {
    uv_env(Cmd::new(uv.display().to_string()), |k| std::env::var(k).ok())
}

fn uv_env(mut c: Cmd, var: impl Fn(&str) -> Option<String>) -> Cmd {
    if var("UV_SYSTEM_CERTS").is_none() && var("UV_NATIVE_TLS").is_none() {
        c = c.env("UV_SYSTEM_CERTS", "1").env("UV_NATIVE_TLS", "1");
    }
    for (pip, uv) in [
        ("PIP_INDEX_URL", ["UV_INDEX_URL", "UV_DEFAULT_INDEX"]),
        ("PIP_EXTRA_INDEX_URL", ["UV_EXTRA_INDEX_URL", "UV_INDEX"]),
    ] {
        if let Some(v) = var(pip).filter(|_| uv.iter().all(|u| var(u).is_none())) {
            c = c.env(uv[0], v);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uv_trusts_the_system_store_and_takes_pips_index_unless_told_otherwise() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            let c = uv_env(Cmd::new("uv"), |k| {
                vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
            });
            c.env
        };
        let set = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(env(&[]), set(&[("UV_SYSTEM_CERTS", "1"), ("UV_NATIVE_TLS", "1")]));
        assert_eq!(
            env(&[("UV_SYSTEM_CERTS", "0"), ("PIP_INDEX_URL", "https://mirror/simple")]),
            set(&[("UV_INDEX_URL", "https://mirror/simple")])
        );
        assert_eq!(
            env(&[
                ("UV_NATIVE_TLS", "1"),
                ("PIP_INDEX_URL", "https://a"),
                ("UV_DEFAULT_INDEX", "https://b")
            ]),
            set(&[])
        );
    }

    #[test]
    fn uv_replaces_the_wheel_and_adds_what_is_missing_in_one_call_and_pip_in_two() {
        let of = |tool| Installer {
            tool,
            offline: true,
            find_links: None,
            fallback: None,
        };
        let what = ["nvidia-cutlass-dsl[cu13]==4.8.1".to_string()];
        let (py, cons) = (Path::new("/v/bin/python"), Path::new("/w/constraints.txt"));
        let uv = of(Tool::Uv("/t/uv".into()))
            .install_with_missing(py, &what, &["nvidia-cutlass-dsl"], cons, None)
            .unwrap();
        assert_eq!(
            uv.args,
            [
                "pip",
                "install",
                "--python",
                "/v/bin/python",
                "--reinstall-package",
                "nvidia-cutlass-dsl",
                "--offline",
                "--constraint",
                "/w/constraints.txt",
                "nvidia-cutlass-dsl[cu13]==4.8.1"
            ]
        );
        // Not `--reinstall`: that would reinstall torch and every CUDA library it needs.
        assert!(!uv.args.iter().any(|a| a == "--reinstall" || a == "--no-deps"));
        assert!(
            of(Tool::Pip)
                .install_with_missing(py, &what, &["x"], cons, None)
                .is_none()
        );
    }
}
