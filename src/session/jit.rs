//! JIT proofs for the components in scope whose recipe has `[verify] jit`: the script's
//! environment rendered for the target archs, the toolkit and the interpreter, and each proof
//! cached under `<cache>/jit/` by what decides its result (component and installed version,
//! script, rendered environment, toolkit, host compiler, target archs), so a second `doctor` or
//! `install` compiles nothing. Only passing proofs are cached.
//!
//! After `install`, the session opened on the environment it left proves what `doctor` proves,
//! with the same cache (so the `doctor` that follows compiles nothing), and
//! [`Session::jit_verdicts`] gives the verdicts on what the run built or installed.
//!
//! It deliberately ignores what the compiled images mean for an arch (`resolve::jit` judges
//! them with the run rules) and components that do not import: a proof cannot say more then.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Session;
use crate::arch::Arch;
use crate::probe::jit::{self, JitOutcome};
use crate::probe::python::PythonFacts;
use crate::probe::smoke::Script;
use crate::probe::{MachineFacts, normalize};
use crate::recipe::model::Jit;
use crate::recipe::template::{Part, Var, Vars};
use crate::recipe::{Recipe, RecipeSet};
use crate::resolve::{self, Reason, Status};
use crate::settings::Settings;

/// A JIT compile of a few kernels is minutes on a loaded 2-core machine; an hour is a hang.
const LIMIT: Duration = Duration::from_secs(3600);

/// The JIT verdict on a component `install` built or installed, for the target archs. Its
/// JSON form (with the rendered `evidence`) is in `report::json`.
#[derive(Debug, Clone)]
pub struct JitVerdict {
    pub name: String,
    pub archs: Vec<Arch>,
    pub status: JitStatus,
    /// Why: the JIT verdict's reason ([`resolve::jit::verdict`]), or [`Reason::JitSkipped`].
    pub reason: Reason,
    /// The proof, as `doctor --json` shows it under `jit` (absent when skipped).
    pub proof: Option<JitOutcome>,
}

/// `ok`; or why not: `blocked` (the proof could not run here, e.g. no toolkit), `broken` (it
/// failed), `wrong-arch` (it compiled for other archs); `skipped` (`--no-jit-proof`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JitStatus {
    Ok,
    Blocked,
    Broken,
    WrongArch,
    Skipped,
}

impl JitStatus {
    fn of(reason: &Reason) -> JitStatus {
        match (reason, reason.status()) {
            (Reason::JitSkipped { .. }, _) => JitStatus::Skipped,
            (_, Status::Ok) => JitStatus::Ok,
            (_, Status::Blocked) => JitStatus::Blocked,
            (_, Status::WrongArch) => JitStatus::WrongArch,
            _ => JitStatus::Broken,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JitStatus::Ok => "ok",
            JitStatus::Blocked => "blocked",
            JitStatus::Broken => "broken",
            JitStatus::WrongArch => "wrong-arch",
            JitStatus::Skipped => "skipped",
        }
    }
}

impl JitVerdict {
    pub fn ok(&self) -> bool {
        self.status == JitStatus::Ok
    }
}

impl Session {
    /// The JIT verdicts on `names` (the components an install built or installed) whose recipe
    /// has `[verify] jit`, for the target archs, from this session's proofs: a session opened
    /// after the install ([`Session::after_install`]) holds the proofs `doctor` makes (cached for
    /// it), so these are its JIT verdicts. Without `settings.jit_proof` each is `skipped`. No
    /// target arch, or no proof (the component does not import: its status says so): nothing.
    pub fn jit_verdicts(&self, settings: &Settings, names: &[&str]) -> Vec<JitVerdict> {
        if self.archs.is_empty() {
            return Vec::new();
        }
        let ev = self.evidence(&self.facts, &self.jit);
        let mut out = Vec::new();
        for (r, jit) in names
            .iter()
            .filter_map(|n| self.set.get(n))
            .filter_map(|r| Some((r, r.jit.as_ref()?)))
        {
            let skipped = Reason::JitSkipped {
                script: jit.path.clone(),
            };
            let (reason, proof) = if settings.jit_proof {
                let Some(reason) = resolve::jit::verdict(r, &ev) else {
                    continue;
                };
                (reason, self.jit.get(&r.name).cloned())
            } else {
                (skipped, None)
            };
            out.push(JitVerdict {
                name: r.name.clone(),
                archs: self.archs.clone(),
                status: JitStatus::of(&reason),
                reason,
                proof,
            });
        }
        out
    }
}

/// Proves (or takes from the cache) the JIT of every component in `scope` that has one.
pub(super) fn prove(
    settings: &Settings,
    set: &RecipeSet,
    python: &Path,
    machine: &MachineFacts,
    archs: &[Arch],
    scope: &[(String, Vec<String>)],
    facts: &PythonFacts,
) -> BTreeMap<String, JitOutcome> {
    let mut out = BTreeMap::new();
    if archs.is_empty() {
        return out;
    }
    for r in scope.iter().filter_map(|(n, _)| set.get(n)) {
        let Some(jit) = &r.jit else { continue };
        if !resolve::status::installed_and_imports(r, facts) {
            continue;
        }
        let proof = prove_one(settings, r, jit, python, machine, archs, facts, &[], true);
        out.insert(r.name.clone(), proof.expect("compiling always answers"));
    }
    out
}

/// The proof of `kernels` (names the component's JIT script knows, passed as
/// `KILN_JIT_KERNELS`) for a backend that needs them: from the cache, or — with `compile` —
/// compiled now (and cached when it passes). `None`: not cached and not compiled.
pub(super) fn prove_kernels(
    s: &Session,
    settings: &Settings,
    r: &Recipe,
    kernels: &[String],
    compile: bool,
) -> Option<JitOutcome> {
    let jit = r.jit.as_ref()?;
    if s.archs.is_empty() || kernels.is_empty() || !resolve::status::installed_and_imports(r, &s.facts) {
        return None;
    }
    let extra = [("KILN_JIT_KERNELS".to_string(), kernels.join(","))];
    prove_one(
        settings, r, jit, &s.python, &s.machine, &s.archs, &s.facts, &extra, compile,
    )
}

#[allow(clippy::too_many_arguments)]
fn prove_one(
    settings: &Settings,
    r: &Recipe,
    jit: &Jit,
    python: &Path,
    machine: &MachineFacts,
    archs: &[Arch],
    facts: &PythonFacts,
    extra: &[(String, String)],
    compile: bool,
) -> Option<JitOutcome> {
    let toolkit = machine.cuda_toolkit.as_ref();
    let home = toolkit.and_then(|t| t.home.as_ref()).map(|h| h.display().to_string());
    let needs_toolkit = jit.env.values().any(|t| {
        t.parts()
            .iter()
            .any(|p| matches!(p, Part::Var(Var::CudaHome | Var::Arch(_))))
    });
    if needs_toolkit && home.is_none() {
        return Some(JitOutcome::Blocked {
            reason: format!(
                "{} compiles its kernels at run time with the CUDA toolkit (nvcc), and none was found ({}); \
                 install one and point CUDA_HOME at it",
                r.name,
                machine.cuda_searched.join("; ")
            ),
        });
    }
    let dist = r.dist.clone().unwrap_or_else(|| r.name.clone());
    let version = facts
        .dists
        .get(&normalize(&dist))
        .map(|d| d.version.clone())
        .unwrap_or_default();
    let vars = Vars {
        python: python.display().to_string(),
        jobs: resolve::plan::jobs_for(r.build.memory_per_job, machine, settings.jobs),
        version: version.clone(),
        cuda_home: home.clone(),
        cuda_version: toolkit.map(|t| t.version.clone()),
        archs: archs.to_vec(),
        ..Vars::default()
    };
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, t) in &jit.env {
        match t.render(&vars) {
            Ok(v) => env.push((k.clone(), v)),
            Err(e) => {
                return Some(JitOutcome::Blocked {
                    reason: format!("cannot set {k} = \"{t}\" for the JIT proof: {e}"),
                });
            }
        }
    }
    let list: Vec<String> = archs.iter().map(Arch::to_string).collect();
    env.push(("KILN_TARGET_ARCHS".into(), list.join(" ")));
    env.extend(extra.iter().cloned());
    if let Some(h) = &home {
        env.push(("CUDA_HOME".into(), h.clone()));
        let path = std::env::var("PATH").unwrap_or_default();
        env.push(("PATH".into(), format!("{}:{path}", Path::new(h).join("bin").display())));
    }
    let key = key(r, &version, &jit.text, &env, machine, python);
    let dir = settings.cache_dir.join("jit");
    let record = dir.join(format!("{key}.json"));
    if !settings.refresh
        && let Some(cached) = crate::state::cached_json(&record)
    {
        return Some(cached);
    }
    if !compile {
        return None;
    }
    let script = Script {
        component: &r.name,
        path: &jit.path,
        text: &jit.text,
        serve: false,
    };
    let task = settings.watch.start(
        crate::watch::Task::JitProof,
        &r.name,
        format!("for {}", list.join(", ")),
    );
    let proof = jit::run(python, &script, &env, &dir.join(&key), LIMIT);
    task.finish(proof.ok);
    let outcome = JitOutcome::Ran(proof);
    if let JitOutcome::Ran(p) = &outcome
        && p.ok
        && let Ok(bytes) = serde_json::to_vec_pretty(&outcome)
    {
        // Concurrent `doctor` runs each rename a whole record of their own.
        let _ = crate::store::atomic::write(&record, &bytes, crate::store::atomic::Sync::Cache);
    }
    Some(outcome)
}

/// What decides a proof's result, hashed.
fn key(r: &Recipe, version: &str, script: &str, env: &[(String, String)], m: &MachineFacts, python: &Path) -> String {
    let mut h = Sha256::new();
    let toolkit = m
        .cuda_toolkit
        .as_ref()
        .map(|t| format!("{} {:?}", t.version, t.home))
        .unwrap_or_default();
    let compiler = m.host_compiler.as_ref().map(|c| c.value.clone()).unwrap_or_default();
    for part in [
        r.name.as_str(),
        version,
        script,
        &toolkit,
        &compiler,
        &python.display().to_string(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for (k, v) in env.iter().filter(|(k, _)| k != "PATH") {
        h.update(format!("{k}={v}\0").as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}
