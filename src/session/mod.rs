//! The session: the pipeline as plain data. [`Session::open`] reads the machine and one
//! interpreter (through the probe cache), runs the smoke tests that can run here, and assesses
//! every component in scope; [`Session::plan`] solves and plans; [`Session::execute`] carries a
//! plan out. `kiln install --locked` and `kiln lock` find their pieces in [`locked`].
//!
//! Everything here is data in, data out: the commands decide what to print and `report` prints
//! it. It deliberately ignores the terminal, argument text (it reads [`Settings`]) and how
//! results are shown, and it never prints.

pub mod aot;
pub mod check;
mod evidence;
mod jit;
pub mod locked;
mod plan;
mod prebuilt;
mod remote;
mod run;
pub mod runtime;
pub mod targets;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::arch::Arch;
use crate::probe::binaries::Binaries;
use crate::probe::cache::CacheUse;
use crate::probe::python::{self, PythonFacts};
use crate::probe::smoke::SmokeResult;
use crate::probe::{self, MachineFacts};
use crate::recipe::RecipeSet;
use crate::resolve::serving::summary::BackendSummary;
use crate::resolve::{self, Assessment};
use crate::settings::Settings;

pub use jit::{JitStatus, JitVerdict};
pub use run::Executed;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// What the user wrote cannot be used (a target that names nothing kiln knows, an
    /// `--arch` that contradicts the lock): a usage error.
    #[error("{0}")]
    Usage(String),
    /// No interpreter to inspect.
    #[error("{0}")]
    Python(String),
    /// The probe of the interpreter could not run.
    #[error("{0}")]
    Probe(String),
    /// A lockfile cannot be reproduced here (other recipes, another Python).
    #[error("{0}")]
    Lock(String),
}

/// Who owns the import packages the components in `scope` own alone (read from `RECORD`s, kept
/// in the cache while site-packages is unchanged; `--refresh` reads them again), and the
/// binaries of an owner the probe did not scan (a distribution of another name with files in
/// them).
fn owned_packages(
    settings: &Settings,
    set: &RecipeSet,
    scope: &[(String, Vec<String>)],
    probed: &mut probe::cache::Probed,
) {
    let packages = import_packages(set, scope);
    if settings.refresh {
        probe::owners::fill(&mut probed.facts, &packages);
    } else {
        probe::owners::fill_cached(&mut probed.facts, &packages, &settings.cache_dir);
    }
    for owner in probed.facts.owners.values().flatten() {
        if !probed.binaries.contains_key(owner)
            && let Some(d) = probed.facts.dists.get(owner)
        {
            probed.binaries.insert(owner.clone(), probe::binaries::scan(d));
        }
    }
}

/// The import packages the components in `scope` own alone.
fn import_packages(set: &RecipeSet, scope: &[(String, Vec<String>)]) -> Vec<String> {
    scope
        .iter()
        .filter_map(|(n, _)| set.get(n))
        .flat_map(|r| r.import_packages.iter().cloned())
        .collect()
}

/// Everything a status-or-plan command needs, probed once.
pub struct Session {
    pub set: RecipeSet,
    pub python: PathBuf,
    /// What chose the interpreter (`--python`, `VIRTUAL_ENV`, `python3 on PATH`).
    pub python_source: &'static str,
    pub machine: MachineFacts,
    pub archs: Vec<Arch>,
    /// Where the target archs came from (`--arch`, or the GPUs found).
    pub arch_source: String,
    /// The targets and everything they need, with features.
    pub scope: Vec<(String, Vec<String>)>,
    /// What the user asked for, for the solver.
    pub request: resolve::solve::Request,
    pub facts: PythonFacts,
    pub binaries: BTreeMap<String, Binaries>,
    /// Smoke tests that ran, by component.
    pub smoke: BTreeMap<String, SmokeResult>,
    /// The target archs a GPU here has (smoke tests run only for these).
    pub smoke_archs: Vec<Arch>,
    /// JIT proofs of the components in scope that compile kernels at run time.
    pub jit: BTreeMap<String, crate::probe::jit::JitOutcome>,
    /// The verdict: the components the installed versions of the targets need, judged
    /// ([`Session::judged_scope`]); what doctor, verify and install report.
    pub assessments: Vec<Assessment>,
    /// Every component in `scope` judged, those only another version pins included: what the
    /// plan starts from, since the solver may choose that version.
    pub scope_assessments: Vec<Assessment>,
    /// Whether the Python facts came from the probe cache.
    pub probe_cache: CacheUse,
    /// Where each part of them came from (by component, by distribution).
    pub probe_sources: crate::probe::cache::Sources,
    /// The wheel sha256 a lock names, by component (`install --locked`; see
    /// [`Session::expect_locked_wheels`]).
    pub locked_wheels: BTreeMap<String, String>,
    /// The backends the user needs (`--need`), checked against the recipes in scope.
    pub needs: Vec<resolve::need::Need>,
    /// Planning for another node (`--for FILE`, [`Session::open_for`]): its wheel tags (`None`:
    /// this interpreter's, asked when needed), the libraries its loader finds, and the file.
    pub node_tags: Option<Result<Vec<String>, String>>,
    pub node_libraries: Option<Vec<String>>,
    pub for_node: Option<PathBuf>,
    /// The components the user asked for and everything they need (empty when no target was
    /// given: every recipe is then in scope, but none is asked for).
    pub asked: Vec<String>,
}

impl Session {
    /// Opens a session on the recipes `set` for `targets` (every recipe when empty): chooses the
    /// interpreter, reads the machine and the interpreter's facts (from the probe cache unless
    /// `settings.refresh`), and assesses each component in scope.
    pub fn open(settings: &Settings, set: RecipeSet, targets: &[String]) -> Result<Session, SessionError> {
        Session::open_proving(settings, set, targets, true, None)
    }

    /// The environment as an install left it, judged as `kiln doctor` judges it right after
    /// (the same probe, cache and verdicts for `targets`); the JIT proofs only with
    /// `settings.jit_proof` (`install --no-jit-proof` leaves them for later: no proof, no JIT
    /// verdict). `verified`: what the install's last verification saw (`apply::RunReport::facts`),
    /// so that imports it just tried are not tried again while nothing changed since.
    pub fn after_install(
        settings: &Settings,
        set: RecipeSet,
        targets: &[String],
        verified: Option<&probe::python::PythonFacts>,
    ) -> Result<Session, SessionError> {
        Session::open_proving(settings, set, targets, settings.jit_proof, verified)
    }

    fn open_proving(
        settings: &Settings,
        set: RecipeSet,
        targets: &[String],
        prove_jit: bool,
        verified: Option<&probe::python::PythonFacts>,
    ) -> Result<Session, SessionError> {
        let (wanted, pins) = targets::parse(&set, targets)?;
        let asked = if targets.is_empty() {
            Vec::new()
        } else {
            set.closure(&wanted).into_iter().map(|(n, _)| n).collect()
        };
        let (python, python_source) = python::choose(settings.python.as_deref()).map_err(SessionError::Python)?;
        let mut machine = probe::cache::machine_facts(&settings.cache_dir, settings.refresh, probe::machine::probe);
        resolve::driver_table::complete(&mut machine).map_err(|e| SessionError::Usage(e.to_string()))?;
        // `--memory-limit`: what the plan sizes jobs by is at most what the user gave.
        if let Some(cap) = settings.memory_limit {
            machine.memory_available = Some(machine.memory_available.map_or(cap, |m| m.min(cap)));
        }
        let (archs, arch_source) = match &settings.archs {
            Some(a) => (a.clone(), "--arch".to_string()),
            None => (machine.gpu_archs(), format!("GPUs ({})", machine.gpu_source)),
        };
        let scope = set.closure(&wanted);
        let needs = resolve::need::resolve(&set, &scope, &settings.needs).map_err(SessionError::Usage)?;
        let mut found = evidence::gather(settings, &set, &python, &machine, &archs, &scope, verified)?;
        owned_packages(settings, &set, &scope, &mut found.probed);
        let jit = if prove_jit {
            jit::prove(settings, &set, &python, &machine, &archs, &scope, &found.probed.facts)
        } else {
            BTreeMap::new()
        };
        let mut s = Session {
            set,
            python,
            python_source,
            machine,
            archs,
            arch_source,
            scope,
            request: resolve::solve::Request {
                targets: wanted,
                pins,
                allow_replace: settings.allow_replace.iter().cloned().collect(),
                prefer: BTreeMap::new(),
            },
            facts: found.probed.facts,
            binaries: found.probed.binaries,
            smoke: found.probed.smoke,
            smoke_archs: found.smoke_archs,
            jit,
            assessments: Vec::new(),
            scope_assessments: Vec::new(),
            probe_cache: found.cache_use,
            probe_sources: found.sources,
            locked_wheels: BTreeMap::new(),
            needs,
            node_tags: None,
            node_libraries: None,
            for_node: None,
            asked,
        };
        s.judge();
        Ok(s)
    }

    /// What keeps an install of `plan` from ending ok, by this session's verdicts (`doctor`'s,
    /// on a session opened after it): every component in scope that is not `ok`, except an
    /// `outdated` one the plan showed it keeps as it is or installs at that very version (a
    /// pin the user gave: its step said why); outdated is older than the recipe prefers, not
    /// broken.
    pub fn not_ok_after(&self, plan: &resolve::Plan) -> Vec<&Assessment> {
        let kept = |name: &str| {
            let installed = self
                .installed(name)
                .map(|d| d.version.split('+').next().unwrap_or(&d.version));
            plan.steps.iter().any(|s| {
                s.name == name
                    && (s.action == resolve::plan::Action::Keep
                        || (s.action.changes() && s.version.as_deref().is_some() && s.version.as_deref() == installed))
            })
        };
        self.assessments
            .iter()
            .filter(|a| a.status != resolve::Status::Ok)
            .filter(|a| !(a.status == resolve::Status::Outdated && kept(&a.name)))
            .collect()
    }

    /// The installed distributions no recipe manages that hold CUDA binaries, each judged for
    /// the target archs by its binaries alone ([`resolve::unmanaged`]).
    pub fn unmanaged(&self) -> Vec<resolve::unmanaged::Unmanaged> {
        resolve::unmanaged::judge(&self.set, &self.facts, &self.binaries, &self.machine, &self.archs)
    }

    /// The installed distribution of component `name`, if any: its own, else one under a former
    /// name or owning its import package ([`resolve::owners`]).
    pub fn installed(&self, name: &str) -> Option<&python::Dist> {
        resolve::owners::provider(self.set.get(name)?, &self.facts).map(|f| f.dist)
    }

    /// Verdicts for the runtime backends of the consumers in scope, for their installed
    /// versions (else the versions a plan would install), on each target arch.
    pub fn backends(&self) -> Vec<BackendSummary> {
        let planned = resolve::solve::solve(&self.set, &self.facts, &self.request)
            .map(|s| s.chosen)
            .unwrap_or_default();
        // The consumers the verdict judges (a component only another version pins is none).
        let consumers: Vec<(String, Option<pep440_rs::Version>)> = self
            .assessments
            .iter()
            .map(|a| &a.name)
            .filter(|n| self.set.get(n).is_some_and(|r| !r.backends.is_empty()))
            .map(|n| {
                let v = self
                    .installed_version(n)
                    .or_else(|| planned.get(n).and_then(|v| v.parse().ok()));
                (n.clone(), v)
            })
            .collect();
        resolve::serving::summary::summaries(&self.serving_evidence(), &consumers, &self.archs)
    }

    /// This node's facts, for a plan made elsewhere (`kiln plan --for`).
    pub fn node_facts(&self, settings: &Settings) -> probe::node::NodeFacts {
        let tags = match &self.node_tags {
            Some(t) => t.clone(),
            None if !self.facts.python.tags.is_empty() => Ok(self.facts.python.tags.clone()),
            None => probe::tags::cached(&self.python, &settings.cache_dir, settings.refresh),
        };
        probe::node::NodeFacts {
            format: probe::node::FORMAT,
            host: probe::node::hostname(),
            machine: self.machine.clone(),
            python: self.facts.clone(),
            tags_error: tags.as_ref().err().cloned(),
            tags: tags.unwrap_or_default(),
            binaries: self.binaries.clone(),
            smoke: self.smoke.clone(),
            smoke_archs: self.smoke_archs.clone(),
            system_libraries: probe::node::system_libraries(),
        }
    }

    /// The installed version of component `name` (its public part), if any.
    pub fn installed_version(&self, name: &str) -> Option<pep440_rs::Version> {
        self.installed(name)?.version.split('+').next()?.parse().ok()
    }

    /// What serving verdicts are judged on here.
    pub fn serving_evidence(&self) -> resolve::serving::Evidence<'_> {
        resolve::serving::Evidence {
            set: &self.set,
            machine: &self.machine,
            assessments: &self.assessments,
            binaries: &self.binaries,
            locations: self
                .facts
                .dists
                .iter()
                .filter_map(|(k, d)| Some((k.clone(), d.location.clone()?)))
                .collect(),
            jit: &self.jit,
            jit_modules: BTreeMap::new(),
        }
    }

    /// What a verdict is judged on: `facts`, this session's binaries and smoke tests, and `jit`.
    fn evidence<'a>(
        &'a self,
        facts: &'a PythonFacts,
        jit: &'a BTreeMap<String, crate::probe::jit::JitOutcome>,
    ) -> resolve::status::Evidence<'a> {
        resolve::status::Evidence {
            set: &self.set,
            machine: &self.machine,
            python: facts,
            binaries: &self.binaries,
            archs: &self.archs,
            smoke: &self.smoke,
            smoke_archs: &self.smoke_archs,
            jit,
            needs: &self.needs,
            asked: &self.asked,
        }
    }

    /// The components the verdict judges: the targets' closure as the versions installed in
    /// `facts` need it (a component only another version pins is no part of it), out of the
    /// session's scope, which holds every version's pins for the solver.
    fn judged_scope(&self, facts: &PythonFacts) -> Vec<(String, Vec<String>)> {
        if self.request.targets.is_empty() {
            return self.scope.clone();
        }
        let installed = |r: &crate::recipe::Recipe| {
            let found = resolve::owners::found(r, facts);
            found.first()?.dist.version.split('+').next()?.parse().ok()
        };
        self.set.closure_as_installed(&self.request.targets, &installed)
    }

    /// Judges the environment: the verdict on what the installed versions need, and every
    /// component in scope for the plan.
    fn judge(&mut self) {
        let judged = self.judged_scope(&self.facts);
        self.scope_assessments = self.assess(&self.facts, &self.scope);
        self.assessments = if judged == self.scope {
            self.scope_assessments.clone()
        } else {
            self.assess(&self.facts, &judged)
        };
    }

    /// The components in `scope`, judged on `facts` and this session's binaries and smoke tests.
    fn assess(&self, facts: &PythonFacts, scope: &[(String, Vec<String>)]) -> Vec<Assessment> {
        let evidence = self.evidence(facts, &self.jit);
        resolve::status::assess(&evidence, scope)
    }
}
