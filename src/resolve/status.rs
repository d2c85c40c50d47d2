//! Statuses: what kiln can say about one component after probing, with the evidence behind it.
//!
//! A component is `ok` only when its distribution is installed, its version is accepted by its
//! recipe and by every dependent in scope, every import its recipe names actually ran, the
//! driver here can run the CUDA runtime it is built for ([`super::driver`]; else `blocked`),
//! each of its required CUDA binaries holds an image for each target arch ([`super::kernels`];
//! else `wrong-arch`, naming each binary), the fingerprints of what it was built against still
//! hold, and (where a GPU of the target arch is here) its smoke test passed. It judges the facts
//! the probe gathered; it never touches the disk, runs nothing and never prints.

use std::collections::BTreeMap;
use std::str::FromStr;

use pep440_rs::Version;
use serde::Serialize;

use super::driver;
use super::kernels::{self, KernelCheck};
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

/// A feature of a component (`flashinfer[cutedsl]`) and whether its imports ran.
#[derive(Debug, Clone, Serialize)]
pub struct FeatureReport {
    pub name: String,
    pub status: Status,
    pub evidence: String,
}

/// What kiln found for one component.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Assessment {
    pub name: String,
    pub status: Status,
    /// The installed version (`null` when absent).
    pub version: Option<String>,
    /// Why the status is what it is, in words a person can check.
    pub evidence: String,
    /// What kiln would install.
    pub want: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<ImportCheck>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<FeatureReport>,
    /// The distribution judged, when it is not the recipe's own (a former name, or the owner of
    /// one of its import packages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installed_as: Option<super::owners::OtherDist>,
    /// Other distributions with files in the import packages it owns alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sharing: Vec<super::owners::OtherDist>,
    /// CUDA binaries without a target arch that only backends the user does not need use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<kernels::Lacking>,
}

/// A version constraint a dependent puts on a component.
struct Constraint<'a> {
    from: &'a str,
    text: &'a str,
    spec: &'a pep440_rs::VersionSpecifiers,
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
    let mut constraints: BTreeMap<&str, Vec<Constraint>> = BTreeMap::new();
    for (name, feats) in scope {
        let Some(r) = set.get(name) else { continue };
        for d in r.depends_with(feats) {
            if let (Some(text), Some(spec)) = (&d.version, &d.spec) {
                constraints.entry(d.name.as_str()).or_default().push(Constraint {
                    from: &r.name,
                    text,
                    spec,
                });
            }
        }
    }
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
    let (status, version, evidence) = match &machine.cuda_toolkit {
        Some(tk) => {
            let at = tk
                .nvcc
                .as_ref()
                .map(|p| format!(" at {}", p.display()))
                .unwrap_or_default();
            match &r.requires.cuda_req {
                Some(req) if !req.matches(&tk.version) => (
                    Status::Blocked,
                    Some(tk.version.to_string()),
                    format!(
                        "CUDA {} found ({}{at}), need {}; install a newer CUDA toolkit (kiln does not install it) and point CUDA_HOME at it",
                        tk.version, tk.source, req
                    ),
                ),
                _ => (
                    Status::Ok,
                    Some(tk.version.to_string()),
                    format!("CUDA {} from {}{at}", tk.version, tk.source),
                ),
            }
        }
        None => (
            Status::Blocked,
            None,
            format!(
                "no CUDA toolkit found ({}); install CUDA {} and set CUDA_HOME (kiln does not install it)",
                machine.cuda_searched.join("; "),
                want.as_deref().unwrap_or("")
            ),
        ),
    };
    Assessment {
        name: r.name.clone(),
        status,
        version,
        evidence,
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

fn failed_imports(c: &[ImportCheck]) -> Option<String> {
    let failed: Vec<String> = c
        .iter()
        .filter(|c| !c.ok)
        .map(|c| {
            format!(
                "import {} failed: {}",
                c.module,
                c.error.as_deref().unwrap_or("unknown error")
            )
        })
        .collect();
    (!failed.is_empty()).then(|| failed.join("; "))
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
    let loc = dist.location.as_deref().unwrap_or("");
    let files: Vec<(String, &crate::fatbin::FileReport)> = bins
        .cuda
        .iter()
        .map(|f| {
            let rel = std::path::Path::new(&f.path)
                .strip_prefix(loc)
                .map_or(f.path.clone(), |p| p.display().to_string());
            (rel, f)
        })
        .collect();
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

/// Whether the driver here can run the CUDA runtime the component is built for: `Err(why)` when
/// it cannot, `Ok(note)` when it can (a note when only minor version compatibility makes it so).
fn driver_check(
    dist: &crate::probe::python::Dist,
    bins: Option<&Binaries>,
    ev: &Evidence,
) -> Result<Option<String>, String> {
    let Some(drv) = &ev.machine.driver_cuda else {
        return Ok(None);
    };
    let torch = (normalize(&dist.name) == "torch")
        .then(|| ev.python.torch.as_ref().and_then(|t| t.cuda.as_deref()))
        .flatten()
        .and_then(|c| driver::Runtime::parse(c, "torch.version.cuda"));
    let linked = bins.and_then(|b| b.cudart).map(|m| driver::Runtime {
        major: m,
        minor: None,
        source: format!("its binaries link libcudart.so.{m}"),
    });
    match torch.or_else(|| driver::Runtime::from_label(&dist.version)).or(linked) {
        Some(rt) => driver::judge(&format!("{} {}", dist.name, dist.version), &rt, drv),
        None => Ok(None),
    }
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
        evidence: String::new(),
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
        let on: Vec<String> = ev
            .archs
            .iter()
            .filter(|a| rule.arch.contains(a))
            .map(|a| a.to_string())
            .collect();
        a.status = Status::Unsupported;
        a.evidence = format!("cannot work on {}: {}", on.join(", "), rule.why);
        return a;
    }
    let Some(dist) = dist else {
        if !python_ok {
            a.status = Status::Unsupported;
            a.evidence = format!(
                "{} needs Python {}; {} is Python {}",
                r.name,
                r.requires.python.as_deref().unwrap_or(""),
                py.python.executable,
                py.python.version
            );
        } else {
            a.status = Status::Missing;
            a.evidence = format!("{dist_name} is not installed in {}", py.python.prefix);
        }
        return a;
    };
    a.imports = imports;
    let (installed_as, sharing) = super::owners::reported(r, &found);
    // Evidence names the distribution judged, as installed.
    let dist_name = if installed_as.is_some() {
        dist.name.clone()
    } else {
        dist_name
    };
    let version = Version::from_str(&dist.version).ok();
    let mut outdated = Vec::new();
    match &version {
        None => outdated.push(format!("installed version `{}` is not a PEP 440 version", dist.version)),
        Some(v) => {
            if !r.accepts_version(v) {
                outdated.push(format!("have {}, recipe accepts {}", dist.version, r.accepts_text()));
            }
            for c in constraints {
                if !c.spec.contains(v) {
                    outdated.push(format!("have {}, {} needs {} {}", dist.version, c.from, r.name, c.text));
                }
            }
        }
    }
    let bins = ev.binaries.get(&normalize(&dist.name));
    let arch = arch_check(r, dist, bins, ev);
    let driver = driver_check(dist, bins, ev);
    let jit = super::jit::verdict(r, ev);
    let stale: Vec<String> = match &dist.kiln {
        None => Vec::new(),
        Some(rec) => rec
            .built_against
            .iter()
            .filter_map(|(dep, old)| {
                let dep_dist = ev
                    .set
                    .get(dep)
                    .and_then(|d| d.dist.clone())
                    .unwrap_or_else(|| dep.clone());
                let now = py
                    .fingerprint(&dep_dist)
                    .unwrap_or_else(|| format!("{dep} not installed"));
                (now != *old).then(|| format!("built against {old}, now {now}"))
            })
            .collect(),
    };
    if let Some(why) = failed_imports(&a.imports) {
        a.status = Status::Broken;
        a.evidence = why;
    } else if let Err(why) = &driver {
        a.status = Status::Blocked;
        a.evidence = why.clone();
    } else if let Some(c) = arch.as_ref().filter(|c| !c.ok()) {
        a.status = Status::WrongArch;
        a.evidence = c.evidence();
    } else if let Some(SmokeResult { ok: false, error, .. }) = ev.smoke.get(&r.name) {
        a.status = Status::Broken;
        a.evidence = format!("smoke test failed: {}", error.as_deref().unwrap_or("?"));
    } else if let Some((status, why)) = jit.as_ref().filter(|(s, _)| *s != Status::Ok) {
        a.status = *status;
        a.evidence = why.clone();
    } else if !stale.is_empty() {
        a.status = Status::Stale;
        a.evidence = stale.join("; ");
    } else if !outdated.is_empty() {
        a.status = Status::Outdated;
        a.evidence = outdated.join("; ");
    } else {
        let proofs: Vec<String> = a
            .imports
            .iter()
            .map(|c| format!("{} ({:.2} s)", c.module, c.seconds))
            .collect();
        a.evidence = if proofs.is_empty() {
            format!(
                "{} {} installed; the recipe names no import to prove it",
                dist_name, dist.version
            )
        } else {
            format!("{} {}; imports ran: {}", dist_name, dist.version, proofs.join(", "))
        };
        if let Some(c) = &arch {
            a.evidence = format!("{}; {}", a.evidence, c.evidence());
        }
        if let Ok(Some(note)) = &driver {
            a.evidence = format!("{}; {note}", a.evidence);
        }
        if let Some((_, proof)) = &jit {
            a.evidence = format!("{}; {proof}", a.evidence);
        }
        if let Some(smoke) = &r.smoke {
            let on: Vec<String> = ev.smoke_archs.iter().map(|x| x.to_string()).collect();
            a.evidence = match ev.smoke.get(&r.name) {
                Some(s) => format!(
                    "{}; smoke test {} passed on {} ({:.2} s)",
                    a.evidence,
                    smoke.path,
                    on.join(", "),
                    s.seconds
                ),
                None => format!(
                    "{}; smoke test {} not run: no GPU of a target arch here",
                    a.evidence, smoke.path
                ),
            };
        }
    }
    a.unavailable = arch.as_ref().map(|c| c.unavailable.clone()).unwrap_or_default();
    let arch_evidence = arch.as_ref().map(|c| c.evidence());
    super::owners::judge(&mut a, r, installed_as, sharing, arch_evidence.as_deref());
    for (fname, f) in &r.features {
        let c = checks(&f.imports, py);
        let (status, evidence) = match failed_imports(&c) {
            Some(why) => (Status::Broken, why),
            None => (Status::Ok, format!("imports ran: {}", f.imports.join(", "))),
        };
        a.features.push(FeatureReport {
            name: fname.clone(),
            status,
            evidence,
        });
    }
    a
}
