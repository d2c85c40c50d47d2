//! Statuses: what kiln can say about one component after probing, with the evidence behind it.
//!
//! A component is `ok` only when its distribution is installed, its version is accepted by its
//! recipe and by every dependent in scope, every import its recipe names actually ran, the
//! driver here can run the CUDA runtime it is built for ([`super::driver`]; else `blocked`),
//! each of its required CUDA binaries holds an image for each target arch ([`super::kernels`];
//! else `wrong-arch`, naming each binary), the fingerprints of what it was built against still
//! hold, and (where a GPU of the target arch is here) its smoke test passed. Each check gives
//! typed reasons ([`super::reason`]), every one kept, and the status is the most severe one's:
//! `broken` > `blocked` > `wrong-arch` > `stale` > `outdated`. It judges the facts the probe
//! gathered; it never touches the disk, runs nothing, never prints and writes no sentence
//! (`report::reason` does).

use std::collections::BTreeMap;
use std::str::FromStr;

use pep440_rs::Version;
use serde::Serialize;

use super::constraints::{self, Constraint};
use super::driver;
use super::kernels::{self, KernelCheck};
use super::reason::{Ran, Reason, status_of};
use crate::arch::Arch;
use crate::probe::binaries::Binaries;
use crate::probe::python::{ImportResult, PythonFacts};
use crate::probe::smoke::SmokeResult;
use crate::probe::{MachineFacts, normalize};
use crate::recipe::{Kind, Recipe, RecipeSet};

/// What `assess` looks at.
pub struct Evidence<'a> {
    pub set: &'a RecipeSet,
    pub machine: &'a MachineFacts,
    pub python: &'a PythonFacts,
    /// CUDA binaries of the installed distributions, by normalized distribution name.
    pub binaries: &'a BTreeMap<String, Binaries>,
    /// The archs the components must run on (empty: no arch check).
    pub archs: &'a [Arch],
    /// Smoke tests that ran, by component.
    pub smoke: &'a BTreeMap<String, SmokeResult>,
    /// The target archs a GPU here has; empty when no smoke test could run.
    pub smoke_archs: &'a [Arch],
    /// JIT proofs, by component (see [`super::jit`]).
    pub jit: &'a BTreeMap<String, crate::probe::jit::JitOutcome>,
    /// The backends the user needs (`--need`): the binaries they name are required.
    pub needs: &'a [super::need::Need],
    /// The components asked for (targets and what they need; empty when none was named): with
    /// the installed ones, the only ones whose requirements judge another's version.
    pub asked: &'a [String],
}

/// Whether `r` is installed (under any of its names, see [`super::owners`]) and every import its
/// recipe names ran.
pub fn installed_and_imports(r: &Recipe, py: &PythonFacts) -> bool {
    let Some(d) = super::owners::provider(r, py) else {
        return false;
    };
    let version = d.dist.version.split('+').next().and_then(|v| v.parse().ok());
    r.imports_of(version.as_ref())
        .iter()
        .all(|m| py.imports.get(m).is_some_and(|i| i.ok))
}

/// What kiln can say about a component.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    #[default]
    Missing,
    Outdated,
    Broken,
    WrongArch,
    Stale,
    Unsupported,
    Blocked,
}

impl Assessment {
    /// With `reasons` (every one kept) and the status they give.
    pub fn with(mut self, reasons: Vec<Reason>) -> Assessment {
        self.status = status_of(&reasons);
        self.reasons = reasons;
        self
    }

    /// One more reason (the status follows the most severe).
    pub fn add(&mut self, reason: Reason) {
        self.reasons.push(reason);
        self.status = status_of(&self.reasons);
    }
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "missing",
            Status::Outdated => "outdated",
            Status::Broken => "broken",
            Status::WrongArch => "wrong-arch",
            Status::Stale => "stale",
            Status::Unsupported => "unsupported",
            Status::Blocked => "blocked",
        }
    }
}

/// One import the recipe asks for, and what happened.
#[derive(Debug, Clone, Serialize)]
pub struct ImportCheck {
    pub module: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub seconds: f64,
}

/// A feature of a component (`flashinfer[cutedsl]`) and whether its imports ran. Its JSON
/// form (with the rendered `evidence`) is in `report::json`.
#[derive(Debug, Clone)]
pub struct FeatureReport {
    pub name: String,
    pub status: Status,
    pub reasons: Vec<Reason>,
}

/// What kiln found for one component. Its JSON form is in `report::json`: these fields, the
/// typed `reasons` and the `evidence` `report::reason` renders from them.
#[derive(Debug, Clone, Default)]
pub struct Assessment {
    pub name: String,
    /// The most severe of `reasons`.
    pub status: Status,
    /// The installed version (`null` when absent).
    pub version: Option<String>,
    /// Why the status is what it is: every reason, failing or not.
    pub reasons: Vec<Reason>,
    /// What kiln would install.
    pub want: Option<String>,
    pub location: Option<String>,
    pub imports: Vec<ImportCheck>,
    pub features: Vec<FeatureReport>,
    /// The distribution judged, when it is not the recipe's own (a former name, or the owner of
    /// one of its import packages).
    pub installed_as: Option<super::owners::OtherDist>,
    /// Other distributions with files in the import packages it owns alone.
    pub sharing: Vec<super::owners::OtherDist>,
    /// CUDA binaries without a target arch that only backends the user does not need use.
    pub unavailable: Vec<kernels::Lacking>,
}

/// Every import the given components ask for (features included), in order, without repeats.
pub fn imports_for(set: &RecipeSet, scope: &[(String, Vec<String>)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, _) in scope {
        let Some(r) = set.get(name) else { continue };
        let feats = r.features.values().flat_map(|f| f.imports.iter());
        for m in r.all_imports().into_iter().chain(feats) {
            if !out.contains(m) {
                out.push(m.clone());
            }
        }
    }
    out
}

/// Assesses every component in `scope` (closure order).
pub fn assess(ev: &Evidence, scope: &[(String, Vec<String>)]) -> Vec<Assessment> {
    let (set, machine) = (ev.set, ev.machine);
    let constraints = constraints::collect(ev, scope);
    scope
        .iter()
        .filter_map(|(name, _)| set.get(name))
        .map(|r| match r.kind {
            Kind::CudaToolkit => assess_toolkit(r, machine),
            Kind::Python => assess_python(r, ev, constraints.get(r.name.as_str()).map_or(&[][..], |v| v)),
        })
        .collect()
}

fn assess_toolkit(r: &Recipe, machine: &MachineFacts) -> Assessment {
    let want = r.requires.cuda.clone();
    let (version, reason) = match &machine.cuda_toolkit {
        Some(tk) => {
            let nvcc = tk.nvcc.as_ref().map(|p| p.display().to_string());
            let (version, source) = (tk.version.to_string(), tk.source.clone());
            let reason = match &r.requires.cuda_req {
                Some(req) if !req.matches(&tk.version) => Reason::ToolkitTooOld {
                    version: version.clone(),
                    source,
                    nvcc,
                    need: req.to_string(),
                },
                _ => Reason::ToolkitFound {
                    version: version.clone(),
                    source,
                    nvcc,
                },
            };
            (Some(version), reason)
        }
        None => (
            None,
            Reason::NoToolkit {
                searched: machine.cuda_searched.clone(),
                want: want.clone(),
            },
        ),
    };
    Assessment {
        name: r.name.clone(),
        status: reason.status(),
        version,
        reasons: vec![reason],
        want,
        location: machine
            .cuda_toolkit
            .as_ref()
            .and_then(|t| t.home.as_ref())
            .map(|h| h.display().to_string()),
        ..Assessment::default()
    }
}

fn checks(modules: &[String], py: &PythonFacts) -> Vec<ImportCheck> {
    modules
        .iter()
        .map(|m| match py.imports.get(m) {
            Some(ImportResult { ok, error, seconds, .. }) => ImportCheck {
                module: m.clone(),
                ok: *ok,
                error: error.clone(),
                seconds: *seconds,
            },
            None => ImportCheck {
                module: m.clone(),
                ok: false,
                error: Some("not probed".into()),
                seconds: 0.0,
            },
        })
        .collect()
}

fn failed_imports(c: &[ImportCheck]) -> Vec<Reason> {
    c.iter()
        .filter(|c| !c.ok)
        .map(|c| Reason::ImportFailed {
            module: c.module.clone(),
            error: c.error.clone(),
        })
        .collect()
}

/// The per-binary verdict over the distribution's CUDA binaries for the target archs; `None`
/// when it holds no CUDA code at all (nothing to judge) or no arch is asked for.
fn arch_check(
    r: &Recipe,
    dist: &crate::probe::python::Dist,
    bins: Option<&Binaries>,
    ev: &Evidence,
) -> Option<KernelCheck> {
    let bins = bins.filter(|b| !b.cuda.is_empty() && !ev.archs.is_empty())?;
    let files = relative_files(bins, dist);
    let driver = ev.machine.driver_cuda.as_ref().map(|d| &d.value);
    let version = Version::from_str(&dist.version).ok();
    let mut c = kernels::check(
        &files,
        ev.archs,
        driver,
        &kernels::Rules::of(r, version.as_ref(), ev.needs),
    );
    c.unreadable = bins.unreadable.clone();
    Some(c)
}

/// The driver's verdicts on the component (see [`driver::verdicts`]): on the CUDA runtime it is
/// built for, and on the target archs when it holds CUDA code.
fn driver_check(dist: &crate::probe::python::Dist, bins: Option<&Binaries>, ev: &Evidence) -> Vec<Reason> {
    let torch = (normalize(&dist.name) == "torch")
        .then(|| ev.python.torch.as_ref().and_then(|t| t.cuda.as_deref()))
        .flatten();
    let rt = driver::runtime_of(&dist.version, torch, bins.and_then(|b| b.cudart));
    let cuda = bins.is_some_and(|b| !b.cuda.is_empty());
    let subject = format!("{} {}", dist.name, dist.version);
    driver::verdicts(&subject, rt.as_ref(), cuda, ev.machine, ev.archs)
}

/// The dependencies it was built against (`abi = true`, recorded in `kiln.json`) that differ now.
fn stale_reasons(dist: &crate::probe::python::Dist, ev: &Evidence) -> Vec<Reason> {
    if let Some(error) = &dist.kiln_unreadable {
        let file = std::path::Path::new(dist.dist_info.as_deref().unwrap_or("?")).join("kiln.json");
        return vec![Reason::RecordUnreadable {
            file: file.display().to_string(),
            error: error.clone(),
        }];
    }
    let Some(rec) = &dist.kiln else {
        return Vec::new();
    };
    rec.built_against
        .iter()
        .filter_map(|(dep, old)| {
            let dep_dist = ev
                .set
                .get(dep)
                .and_then(|d| d.dist.clone())
                .unwrap_or_else(|| dep.clone());
            let now = ev.python.fingerprint(&dep_dist);
            (now.as_ref() != Some(old)).then(|| Reason::BuiltAgainst {
                dep: dep.clone(),
                old: old.clone(),
                now,
            })
        })
        .collect()
}

fn assess_python(r: &Recipe, ev: &Evidence, constraints: &[Constraint]) -> Assessment {
    let py = ev.python;
    let dist_name = r.dist.clone().unwrap_or_else(|| r.name.clone());
    let found = super::owners::found(r, py);
    let dist = found.first().map(|f| f.dist);
    // The imports of the installed version (a release may name its extensions otherwise).
    let installed = dist.and_then(|d| d.version.split('+').next()?.parse().ok());
    let imports = checks(r.imports_of(installed.as_ref()), py);
    let want = r.version.as_ref().map(|v| v.to_string());
    let mut a = Assessment {
        name: r.name.clone(),
        status: Status::Ok,
        version: dist.map(|d| d.version.clone()),
        reasons: Vec::new(),
        want,
        location: dist.and_then(|d| d.location.clone()),
        ..Assessment::default()
    };
    let python_ok = match (&r.requires.python_spec, Version::from_str(&py.python.version)) {
        (Some(spec), Ok(v)) => spec.contains(&v),
        _ => true,
    };
    if let Some(rule) = r
        .requires
        .rules
        .iter()
        .find(|rule| rule.unsupported && ev.archs.iter().any(|a| rule.arch.contains(a)))
    {
        let archs = ev.archs.iter().filter(|a| rule.arch.contains(a)).copied().collect();
        return a.with(vec![Reason::ArchUnsupported {
            component: r.name.clone(),
            archs,
            source: rule.why.clone(),
        }]);
    }
    let Some(dist) = dist else {
        let why = if !python_ok {
            Reason::PythonUnsupported {
                component: r.name.clone(),
                needs: r.requires.python.clone().unwrap_or_default(),
                python: py.python.executable.clone(),
                have: py.python.version.clone(),
            }
        } else {
            Reason::NotInstalled {
                dist: dist_name,
                prefix: py.python.prefix.clone(),
            }
        };
        return a.with(vec![why]);
    };
    a.imports = imports;
    let (installed_as, sharing) = super::owners::reported(r, &found);
    // Evidence names the distribution judged, as installed.
    let dist_name = if installed_as.is_some() {
        dist.name.clone()
    } else {
        dist_name
    };
    let bins = ev.binaries.get(&normalize(&dist.name));
    // Every reason, failing or not, in the order the evidence tells them; the status is the
    // most severe one's (see [`super::reason::status_of`]).
    let failed = failed_imports(&a.imports);
    let mut reasons = Vec::new();
    if failed.is_empty() {
        reasons.push(if a.imports.is_empty() {
            Reason::NoImportNamed {
                dist: dist_name,
                version: dist.version.clone(),
            }
        } else {
            Reason::ImportsRan {
                dist: dist_name,
                version: dist.version.clone(),
                imports: a
                    .imports
                    .iter()
                    .map(|c| Ran {
                        module: c.module.clone(),
                        seconds: c.seconds,
                    })
                    .collect(),
            }
        });
    }
    reasons.extend(failed);
    let arch = arch_check(r, dist, bins, ev);
    reasons.extend(arch.as_ref().map(|c| c.reason()));
    reasons.extend(driver_check(dist, bins, ev));
    reasons.extend(super::jit::verdict(r, ev));
    if let Some(smoke) = r.smoke.as_ref().filter(|s| s.serve) {
        // The strongest evidence there is, so it comes first.
        let script = smoke.path.clone();
        let reason = match ev.smoke.get(&r.name) {
            Some(SmokeResult { ok: false, error, .. }) => Reason::ServeFailed {
                script,
                error: error.clone(),
            },
            Some(SmokeResult {
                served: Some(served),
                seconds,
                ..
            }) => Reason::Served {
                script,
                archs: ev.smoke_archs.to_vec(),
                seconds: *seconds,
                served: served.clone(),
            },
            // A pass that measured nothing (a cache entry of an older kiln) proves nothing.
            Some(_) => Reason::ServeNotRun { script },
            None => match driver::smoke_blocked(ev.machine, ev.archs, ev.smoke_archs) {
                Some((archs, driver)) => Reason::SmokeNeedsDriver { script, archs, driver },
                None => Reason::ServeNotRun { script },
            },
        };
        reasons.insert(0, reason);
    } else if let Some(smoke) = &r.smoke {
        let script = smoke.path.clone();
        reasons.push(match ev.smoke.get(&r.name) {
            Some(SmokeResult { ok: false, error, .. }) => Reason::SmokeFailed {
                script,
                error: error.clone(),
            },
            Some(s) => Reason::SmokePassed {
                script,
                archs: ev.smoke_archs.to_vec(),
                seconds: s.seconds,
            },
            None => match driver::smoke_blocked(ev.machine, ev.archs, ev.smoke_archs) {
                Some((archs, driver)) => Reason::SmokeNeedsDriver { script, archs, driver },
                None => Reason::SmokeNotRun { script },
            },
        });
    }
    reasons.extend(stale_reasons(dist, ev));
    reasons.extend(constraints::version_reasons(r, dist, constraints));
    reasons.extend(constraints::companion_reasons(r, dist, py));
    reasons.extend(constraints::companion_images(r, dist, ev));
    reasons.extend(constraints::arch_limits(r, dist, ev.archs));
    let mut a = a.with(reasons);
    a.unavailable = arch.as_ref().map(|c| c.unavailable.clone()).unwrap_or_default();
    super::owners::judge(&mut a, r, installed_as, sharing);
    for (fname, f) in &r.features {
        let failed = failed_imports(&checks(&f.imports, py));
        let reasons = if failed.is_empty() {
            vec![Reason::FeatureImportsRan {
                imports: f.imports.clone(),
            }]
        } else {
            failed
        };
        a.features.push(FeatureReport {
            name: fname.clone(),
            status: status_of(&reasons),
            reasons,
        });
    }
    a
}

/// A distribution's CUDA binaries by their path inside its location (as its RECORD names them).
pub(super) fn relative_files<'a>(
    bins: &'a Binaries,
    dist: &crate::probe::python::Dist,
) -> Vec<(String, &'a crate::fatbin::FileReport)> {
    let loc = dist.location.as_deref().unwrap_or("");
    bins.cuda
        .iter()
        .map(|f| {
            let rel = std::path::Path::new(&f.path)
                .strip_prefix(loc)
                .map_or(f.path.clone(), |p| p.display().to_string());
            (rel, f)
        })
        .collect()
}
