//! Probes one Python interpreter in a single process: installed distributions and the imports
//! the recipes ask for, each in its own try/except with its exact error text.
//!
//! The probe script is embedded and run with `-I -B` (isolated: no user site, no PYTHONPATH,
//! no bytecode written) from an empty working directory, so it sees what the interpreter itself
//! sees. It deliberately trusts nothing the metadata says about imports: an import is `ok` only
//! when it ran. Crash and hang isolation per import is left to a later stage.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::process::{Cmd, Exit, Next, Streamed};

pub use super::torch::TorchFacts;

/// The probe run inside the interpreter. Its text is part of the probe cache's key.
pub const SCRIPT: &str = include_str!("probe.py");

/// The interpreter itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interpreter {
    pub executable: String,
    pub version: String,
    pub implementation: String,
    pub prefix: String,
    pub base_prefix: String,
    /// `purelib`, `platlib`, `scripts` from sysconfig.
    #[serde(default)]
    pub paths: BTreeMap<String, Option<String>>,
    /// The PEP 508 environment markers (`sys_platform`, `python_version`, ...); empty when the
    /// interpreter was not probed.
    #[serde(default)]
    pub markers: BTreeMap<String, String>,
    /// The wheel tags it supports, best first (`packaging.tags.sys_tags()`, asked by the probe
    /// that lists the distributions); empty when it could not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl Interpreter {
    /// The marker environment requirements are evaluated in; `None` when the markers are not
    /// all known (then only `extra` markers are evaluated and every other marker applies).
    pub fn marker_environment(&self) -> Option<pep508_rs::MarkerEnvironment> {
        let m = |k: &str| self.markers.get(k).map(String::as_str);
        pep508_rs::MarkerEnvironment::try_from(pep508_rs::MarkerEnvironmentBuilder {
            implementation_name: m("implementation_name")?,
            implementation_version: m("implementation_version")?,
            os_name: m("os_name")?,
            platform_machine: m("platform_machine")?,
            platform_python_implementation: m("platform_python_implementation")?,
            platform_release: m("platform_release")?,
            platform_system: m("platform_system")?,
            platform_version: m("platform_version")?,
            python_full_version: m("python_full_version")?,
            python_version: m("python_version")?,
            sys_platform: m("sys_platform")?,
        })
        .ok()
    }
}

/// One installed distribution.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "super::dist_wire::DistWire")]
pub struct Dist {
    pub name: String,
    pub version: String,
    pub location: Option<String>,
    pub dist_info: Option<String>,
    pub direct_url: Option<serde_json::Value>,
    #[serde(default)]
    pub requires: Vec<String>,
    pub installer: Option<String>,
    /// What kiln recorded when it built this distribution (`<dist-info>/kiln.json`).
    #[serde(default)]
    pub kiln: Option<BuildRecord>,
    /// Why its `kiln.json` cannot be read (not a regular file, too large, not JSON, another
    /// shape): the component is then unproven, never a probe that fails for everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln_unreadable: Option<String>,
}

/// Written by kiln into the dist-info directory of everything it installs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuildRecord {
    pub component: String,
    pub version: String,
    /// `sha256:...`, `git:<commit>`, `path:...`, `index:<requirement>`.
    pub source: String,
    #[serde(default)]
    pub wheel_sha256: Option<String>,
    #[serde(default)]
    pub archs: Vec<crate::arch::Arch>,
    #[serde(default)]
    pub cuda: Option<String>,
    /// Fingerprints of the dependencies it links against (`abi = true`), by component.
    #[serde(default)]
    pub built_against: std::collections::BTreeMap<String, String>,
    /// The features it was built with (`cutedsl`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// The declared build inputs it was built with: name -> `git:<commit>` / `sha256:<hex>`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub inputs: std::collections::BTreeMap<String, String>,
}

/// Whether one import ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImportResult {
    pub ok: bool,
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceback: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub seconds: f64,
    /// An `ImportError`'s `name` and `path`: the module not found (or not loaded), and the file
    /// that could not be loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_module: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_file: Option<String>,
    /// The import never finished: kiln's time limit or a signal from outside (SIGKILL, SIGTERM,
    /// SIGINT) ended the interpreter.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub killed: bool,
    /// The files this import loaded (or ran through, when it failed), as the probe reported
    /// them: what the probe cache stamps the import by. Read, never written out.
    #[serde(default, skip_serializing)]
    pub loaded: Vec<String>,
}

/// Everything the probe learnt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PythonFacts {
    pub python: Interpreter,
    /// Keyed by normalized distribution name (PEP 503).
    pub dists: BTreeMap<String, Dist>,
    pub imports: BTreeMap<String, ImportResult>,
    /// Present when torch was imported by the probe.
    pub torch: Option<TorchFacts>,
    /// For the import packages asked about ([`super::owners::fill`]), the normalized names of
    /// the distributions whose `RECORD` lists files in them; filled after the probe, never by it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub owners: BTreeMap<String, Vec<String>>,
    /// The smoke tests the install's verification that saw these facts ran, by component, each
    /// with the key of what ran ([`super::smoke::key`]); filled by that verification, never by
    /// the probe. The verdict right after the install reads them instead of running them again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub smoke: BTreeMap<String, (String, super::smoke::SmokeResult)>,
}

impl PythonFacts {
    /// Whether `other` saw the same interpreter with the same distributions, each at the same
    /// version and place (what two probes of one environment, with nothing installed or
    /// removed between them, agree on).
    pub fn same_listing(&self, other: &PythonFacts) -> bool {
        self.python.executable == other.python.executable
            && self.dists.len() == other.dists.len()
            && self.dists.iter().all(|(n, d)| {
                other
                    .dists
                    .get(n)
                    .is_some_and(|x| x.version == d.version && x.location == d.location && x.dist_info == d.dist_info)
            })
    }

    /// An interpreter with nothing installed, probed by nobody: the world of synthetic
    /// resolutions (benchmarks, solver tests).
    pub fn nothing_installed(executable: &str, version: &str) -> PythonFacts {
        PythonFacts {
            python: Interpreter {
                executable: executable.to_string(),
                version: version.to_string(),
                implementation: "cpython".into(),
                prefix: "/venv".into(),
                base_prefix: "/usr".into(),
                paths: BTreeMap::new(),
                markers: BTreeMap::new(),
                tags: Vec::new(),
            },
            dists: BTreeMap::new(),
            imports: BTreeMap::new(),
            torch: None,
            owners: BTreeMap::new(),
            smoke: BTreeMap::new(),
        }
    }

    /// The fingerprint a component built against `dep` records: torch's ABI facts for torch,
    /// else the distribution's version and the wheel kiln built it from.
    pub fn fingerprint(&self, dep_dist: &str) -> Option<String> {
        let name = normalize(dep_dist);
        let d = self.dists.get(&name)?;
        if name == "torch"
            && let Some(t) = &self.torch
        {
            return Some(t.fingerprint());
        }
        let build = d
            .kiln
            .as_ref()
            .and_then(|k| k.wheel_sha256.clone())
            .map(|s| format!(" wheel {}", s.chars().take(12).collect::<String>()));
        Some(format!("{} {}{}", d.name, d.version, build.unwrap_or_default()))
    }
}

#[derive(Deserialize)]
struct Raw {
    python: Interpreter,
    dists: Vec<Dist>,
    #[serde(default)]
    torch: Option<TorchFacts>,
}

/// Why the interpreter could not be probed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot run `{python}`: {source}")]
    Spawn {
        python: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the probe of `{python}` did not finish within {seconds} s (an import hangs?)")]
    Timeout { python: String, seconds: u64 },
    #[error("the probe of `{python}` failed ({status}):\n{stderr}")]
    Failed {
        python: String,
        status: String,
        stderr: String,
    },
    #[error("the probe of `{python}` printed something that is not its JSON answer: {detail}")]
    BadAnswer { python: String, detail: String },
}

/// A distribution name in its normalized form: the store's rule, [`crate::store::normalize`].
pub use crate::store::normalize;

/// Runs the probe on `python`, trying `imports` in the given order, each within `per_import`.
///
/// Normally one process does everything. An import that hangs past its time limit, or that
/// crashes the interpreter (segfault, abort), is pinned on that module from the probe's own
/// progress lines; the probe then runs again for the imports that had not run yet, so every
/// other component still reports.
pub fn probe(python: &Path, imports: &[String], per_import: Duration) -> Result<PythonFacts, ProbeError> {
    probe_as(python, imports, per_import, true)
}

/// [`probe`] without the distribution list (`dists` stays empty): the interpreter, the imports
/// and torch's facts. `probe::gather` runs one of these per component, side by side.
pub fn probe_imports(python: &Path, imports: &[String], per_import: Duration) -> Result<PythonFacts, ProbeError> {
    probe_as(python, imports, per_import, false)
}

fn probe_as(python: &Path, imports: &[String], per_import: Duration, dists: bool) -> Result<PythonFacts, ProbeError> {
    let py = python.display().to_string();
    let mut results: BTreeMap<String, ImportResult> = BTreeMap::new();
    let mut remaining: Vec<String> = imports.to_vec();
    loop {
        let run = run_once(&py, &remaining, per_import, dists)?;
        let done: Vec<String> = run.results.keys().cloned().collect();
        results.extend(run.results);
        match (run.stopped, run.final_) {
            (None, Some(raw)) => {
                return Ok(PythonFacts {
                    python: raw.python,
                    dists: raw.dists.into_iter().map(|d| (normalize(&d.name), d)).collect(),
                    imports: results,
                    torch: raw.torch,
                    owners: BTreeMap::new(),
                    smoke: BTreeMap::new(),
                });
            }
            (None, None) => {
                return Err(ProbeError::BadAnswer {
                    python: py,
                    detail: "the probe ended without its final answer".into(),
                });
            }
            (Some((module, why, killed)), _) => {
                let error = Some(why);
                let failed = ImportResult {
                    ok: false,
                    error,
                    traceback: None,
                    file: None,
                    seconds: 0.0,
                    error_module: None,
                    error_file: None,
                    killed,
                    loaded: Vec::new(),
                };
                results.insert(module.clone(), failed);
                remaining.retain(|m| *m != module && !done.contains(m));
            }
        }
    }
}

struct Run {
    results: BTreeMap<String, ImportResult>,
    /// The import that hung or crashed the interpreter, what happened, and whether it was killed.
    stopped: Option<(String, String, bool)>,
    final_: Option<Raw>,
}

fn run_once(py: &str, imports: &[String], per_import: Duration, dists: bool) -> Result<Run, ProbeError> {
    let request = serde_json::json!({ "imports": imports, "dists": dists }).to_string();
    let mut heard = Heard {
        run: Run {
            results: BTreeMap::new(),
            stopped: None,
            final_: None,
        },
        current: None,
        bad_answer: None,
        // Listing distributions before the first import gets a generous limit of its own.
        limit: per_import.max(Duration::from_secs(60)),
        per_import,
    };
    // An empty directory as cwd, so that nothing in the user's cwd shadows a package.
    let ended = Cmd::new(py)
        .args(["-I", "-B", "-c", SCRIPT])
        .cwd(std::env::temp_dir())
        .stream(request.as_bytes(), heard.limit, |line| heard.line(line))
        .map_err(|source| ProbeError::Spawn {
            python: py.to_string(),
            source,
        })?;
    heard.ended(py, ended)
}

/// What one run of the probe has said so far.
struct Heard {
    run: Run,
    /// The import under way.
    current: Option<String>,
    /// Why its final answer could not be read.
    bad_answer: Option<String>,
    /// How long to wait for the next line.
    limit: Duration,
    per_import: Duration,
}

impl Heard {
    fn line(&mut self, line: &str) -> Next {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            return Next::Wait(self.limit); // not ours (a module wrote to the real stdout)
        };
        if let Some(m) = v.get("start").and_then(|m| m.as_str()) {
            self.current = Some(m.to_string());
            self.limit = self.per_import;
        } else if let (Some(m), Some(o)) = (v.get("result").and_then(|m| m.as_str()), v.get("outcome")) {
            if let Ok(res) = serde_json::from_value::<ImportResult>(o.clone()) {
                self.run.results.insert(m.to_string(), res);
            }
            self.current = None;
        } else if let Some(f) = v.get("final") {
            match serde_json::from_value::<Raw>(f.clone()) {
                Ok(raw) => self.run.final_ = Some(raw),
                Err(e) => {
                    self.bad_answer = Some(e.to_string());
                    return Next::Stop;
                }
            }
        }
        Next::Wait(self.limit)
    }

    /// The run as it ended: its answer, or the import that hung or crashed the interpreter.
    fn ended(mut self, py: &str, ended: Streamed) -> Result<Run, ProbeError> {
        let python = py.to_string();
        if let Some(detail) = self.bad_answer {
            return Err(ProbeError::BadAnswer { python, detail });
        }
        if let Exit::TimedOut(waited) = ended.exit {
            let Some(m) = self.current else {
                let seconds = waited.as_secs();
                return Err(ProbeError::Timeout { python, seconds });
            };
            let secs = self.per_import.as_secs();
            let why = format!("timed out: the import did not finish within {secs} s");
            self.run.stopped = Some((m, why, true));
            return Ok(self.run);
        }
        if self.run.final_.is_some() {
            return Ok(self.run);
        }
        if let Exit::NoStatus(_) = ended.exit {
            let detail = "lost the probe process".into();
            return Err(ProbeError::BadAnswer { python, detail });
        }
        let how = ended.exit.to_string();
        let Some(m) = self.current else {
            let stderr = last_lines(&ended.stderr, 15);
            return Err(ProbeError::Failed {
                python,
                status: how,
                stderr,
            });
        };
        let tail = last_lines(&ended.stderr, 3);
        let detail = if tail.is_empty() {
            String::new()
        } else {
            format!(": {tail}")
        };
        // SIGKILL (the OOM killer), SIGTERM, SIGINT: sent from outside, not a crash of its own.
        let killed = matches!(ended.exit, Exit::Signal(9 | 15 | 2));
        self.run.stopped = Some((m, format!("crashed the interpreter ({how}){detail}"), killed));
        Ok(self.run)
    }
}

fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The interpreter kiln works on: `--python`, else `$VIRTUAL_ENV/bin/python`, else `python3`.
pub fn choose(explicit: Option<&Path>) -> Result<(PathBuf, &'static str), String> {
    if let Some(p) = explicit {
        if p.components().count() == 1 && !p.exists() {
            return which::which(p)
                .map(|f| (f, "--python"))
                .map_err(|_| format!("`{}` is not on PATH", p.display()));
        }
        if !p.exists() {
            return Err(format!("`{}` does not exist", p.display()));
        }
        // Absolute, not canonical: a venv's python is a symlink that must stay one. Builds run
        // in other directories, where a relative path would name nothing.
        let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        return Ok((p, "--python"));
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(venv).join("bin").join("python");
        let p = std::path::absolute(&p).unwrap_or(p);
        if p.exists() {
            return Ok((p, "VIRTUAL_ENV"));
        }
        return Err(format!("VIRTUAL_ENV is set but `{}` does not exist", p.display()));
    }
    which::which("python3")
        .map(|p| (p, "python3 on PATH"))
        .map_err(|_| "no Python found: pass --python PATH, activate a virtualenv, or put python3 on PATH".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_pep_503() {
        assert_eq!(normalize("Flash_Attn"), "flash-attn");
        assert_eq!(normalize("a.._b"), "a-b");
        assert_eq!(normalize("nvidia-cutlass-dsl"), "nvidia-cutlass-dsl");
        assert_eq!(normalize("Torch"), "torch");
    }

    #[test]
    fn probes_the_real_interpreter() {
        let (py, _) = choose(Some(Path::new("python3"))).unwrap();
        let f = probe(
            &py,
            &["json".into(), "kiln_no_such_module".into()],
            Duration::from_secs(60),
        )
        .unwrap();
        assert!(f.imports["json"].ok);
        assert_eq!(
            f.imports["kiln_no_such_module"].error.as_deref(),
            Some("ModuleNotFoundError: No module named 'kiln_no_such_module'")
        );
        assert_eq!(
            f.imports["kiln_no_such_module"].error_module.as_deref(),
            Some("kiln_no_such_module")
        );
        assert!(f.python.version.starts_with('3'));
    }
}
