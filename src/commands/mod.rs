//! Subcommands: each turns parsed arguments into calls on the core and hands the results to
//! `report`. Shared set-up (recipes, interpreter, machine, target archs) lives in [`Session`].

mod arch_cmd;
mod bundle;
mod cache;
pub use arch_cmd::ArchFile;
mod doctor;
mod install;
mod lock;
mod plan;
mod recipes;
mod verify;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use crate::arch::{self, Arch};
use crate::cli::{Cli, Command, Global};
use crate::probe::python::{self, PythonFacts};
use crate::probe::{self as probe_mod, MachineFacts};
use crate::recipe::{LoadError, RecipeSet};
use crate::report;
use crate::resolve::{self, Assessment, Plan, PlanOptions};

/// How a command ends, mapped to the exit status.
pub enum Failure {
    /// Bad arguments: exit 2.
    Usage(String),
    /// Something the user must act on (it has been printed already, or is in the message): exit 1.
    User(String),
    /// Already reported in full: exit 1.
    Reported,
}

pub type CmdResult = Result<ExitCode, Failure>;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let result = match &cli.command {
        Command::Doctor(t) => doctor::run(&cli.global, &t.targets),
        Command::Plan(t) => plan::run(&cli.global, &t.targets),
        Command::Install(a) if a.locked => install::run_locked(&cli.global, &a.targets.targets, a.dry_run, &a.lock),
        Command::Install(a) if a.bundle.is_some() => install::run_bundle(
            &cli.global,
            &a.targets.targets,
            a.dry_run,
            a.bundle.as_deref().unwrap_or(std::path::Path::new("")),
        ),
        Command::Bundle(a) => bundle::run(&cli.global, &a.lock, &a.output),
        Command::Cache(a) => cache::run(&cli.global, a.action.as_ref()),
        Command::Install(a) => install::run(&cli.global, &a.targets.targets, a.dry_run),
        Command::Lock(a) => lock::run(&cli.global, &a.targets.targets, &a.output),
        Command::Verify(t) => verify::run(&cli.global, &t.targets),
        Command::Recipes(a) => recipes::run(&cli.global, a.name.as_deref()),
        Command::Arch(a) => arch_cmd::run(&cli.global, a),
    };
    match result {
        Ok(code) => code,
        Err(Failure::Usage(m)) => {
            report::error(&m);
            ExitCode::from(2)
        }
        Err(Failure::User(m)) => {
            report::error(&m);
            ExitCode::from(1)
        }
        Err(Failure::Reported) => ExitCode::from(1),
    }
}

/// Reports a version conflict (JSON or text) and turns it into exit status 1.
pub fn conflict(g: &Global, c: &resolve::solve::Conflict) -> Failure {
    if g.json {
        report::json(&serde_json::json!({ "conflict": c }));
    }
    report::conflict(c);
    Failure::Reported
}

pub fn load_recipes(g: &Global) -> Result<RecipeSet, Failure> {
    let loaded = match &g.recipes {
        Some(dir) => RecipeSet::from_dir(dir),
        None => RecipeSet::embedded(),
    };
    loaded.map_err(|e| match e {
        LoadError::Invalid(d) => {
            report::diagnostics(&d, g.json);
            Failure::Reported
        }
        other => Failure::User(other.to_string()),
    })
}

/// Targets as `(component, features)`; an empty list means every recipe.
/// Targets as `(component, features)`, and the version pins given with them.
pub type Targets = (
    Vec<(String, Vec<String>)>,
    BTreeMap<String, (String, pep440_rs::VersionSpecifiers)>,
);

pub fn parse_targets(set: &RecipeSet, targets: &[String]) -> Result<Targets, Failure> {
    let mut pins = BTreeMap::new();
    if targets.is_empty() {
        return Ok((set.recipes.keys().map(|k| (k.clone(), Vec::new())).collect(), pins));
    }
    let mut out = Vec::new();
    for t in targets {
        let req = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(t).map_err(|e| {
            Failure::Usage(format!(
                "`{t}` is not a target: {}",
                e.to_string().lines().next().unwrap_or("")
            ))
        })?;
        if req.marker != pep508_rs::MarkerTree::TRUE {
            return Err(Failure::Usage(format!("`{t}`: markers on targets are not supported")));
        }
        let name = req.name.to_string();
        match &req.version_or_url {
            None => {}
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => {
                pins.insert(name.clone(), (t.trim().to_string(), s.clone()));
            }
            Some(pep508_rs::VersionOrUrl::Url(_)) => {
                return Err(Failure::Usage(format!(
                    "`{t}`: URLs on targets are not supported; write a recipe with that source"
                )));
            }
        }
        let Some(r) = set.get(&name) else {
            let hint = set
                .closest(&name)
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            return Err(Failure::Usage(format!(
                "no recipe named `{name}`{hint}; `kiln recipes` lists them"
            )));
        };
        let mut feats = Vec::new();
        for e in &req.extras {
            let f = e.to_string();
            if !r.features.contains_key(&f) {
                return Err(Failure::Usage(format!(
                    "`{name}` has no feature `{f}` (it has: {})",
                    r.features.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            feats.push(f);
        }
        out.push((name, feats));
    }
    Ok((out, pins))
}

/// Everything a status-or-plan command needs, probed once.
pub struct Session {
    pub set: RecipeSet,
    pub python: PathBuf,
    pub python_source: &'static str,
    pub machine: MachineFacts,
    pub archs: Vec<Arch>,
    pub arch_source: String,
    pub scope: Vec<(String, Vec<String>)>,
    /// What the user asked for, for the solver.
    pub request: resolve::solve::Request,
    pub facts: PythonFacts,
    pub binaries: std::collections::BTreeMap<String, crate::probe::binaries::Binaries>,
    /// Smoke tests that ran, by component.
    pub smoke: BTreeMap<String, probe_mod::smoke::SmokeResult>,
    /// The target archs a GPU here has (smoke tests run only for these).
    pub smoke_archs: Vec<Arch>,
    pub assessments: Vec<Assessment>,
    /// Whether the Python facts came from the probe cache.
    pub probe_cache: probe_mod::cache::CacheUse,
}

impl Session {
    pub fn open(g: &Global, targets: &[String]) -> Result<Session, Failure> {
        Session::open_with(g, targets, |_| Ok(()))
    }

    /// [`Session::open`], with the recipes adjusted before anything is planned (a lockfile pins
    /// their sources).
    pub fn open_with(
        g: &Global,
        targets: &[String],
        adjust: impl FnOnce(&mut RecipeSet) -> Result<(), Failure>,
    ) -> Result<Session, Failure> {
        let mut set = load_recipes(g)?;
        adjust(&mut set)?;
        let (wanted, pins) = parse_targets(&set, targets)?;
        let archs_flag = match &g.arch {
            Some(a) => Some(arch::parse_list(a).map_err(|e| Failure::Usage(e.to_string()))?),
            None => None,
        };
        let (python, python_source) = python::choose(g.python.as_deref()).map_err(Failure::User)?;
        let cache = Session::cache_dir(g);
        let machine = probe_mod::cache::machine_facts(&cache, g.refresh, probe_mod::machine::probe);
        let (archs, arch_source) = match archs_flag {
            Some(a) => (a, "--arch".to_string()),
            None => (machine.gpu_archs(), format!("GPUs ({})", machine.gpu_source)),
        };
        let scope = set.closure(&wanted);
        let imports = resolve::status::imports_for(&set, &scope);
        let dists: Vec<String> = scope
            .iter()
            .filter_map(|(name, _)| set.get(name).and_then(|r| r.dist.as_deref()).map(probe_mod::normalize))
            .collect();
        let timeout = Duration::from_secs(g.import_timeout.max(1));
        // Smoke tests run only where a GPU of a target arch is present; which ones, their
        // scripts and those archs are part of the cache key.
        let smoke_archs = probe_mod::smoke::runnable_archs(&machine.gpu_archs(), &archs);
        let smoke_recipes: Vec<&crate::recipe::Recipe> = if smoke_archs.is_empty() {
            Vec::new()
        } else {
            scope
                .iter()
                .filter_map(|(n, _)| set.get(n))
                .filter(|r| r.smoke.is_some())
                .collect()
        };
        let smoke_key: Vec<String> = smoke_recipes
            .iter()
            .map(|r| format!("{}\0{}", r.name, r.smoke.as_ref().map_or("", |s| s.text.as_str())))
            .chain(smoke_archs.iter().map(|a| a.to_string()))
            .collect();
        let (probed, probe_cache) = probe_mod::cache::python_facts(
            &cache,
            &python,
            &imports,
            &dists,
            &smoke_key.join("\0"),
            g.refresh,
            || {
                let facts = python::probe(&python, &imports, timeout).map_err(|e| Failure::User(e.to_string()))?;
                let binaries = dists
                    .iter()
                    .filter_map(|d| {
                        facts
                            .dists
                            .get(d)
                            .map(|dist| (d.clone(), probe_mod::binaries::scan(dist)))
                    })
                    .collect();
                // Only what is installed and imports: a smoke test cannot prove more than that
                // an import failed, which the probe already says.
                let smoke = smoke_recipes
                    .iter()
                    .filter(|r| resolve::status::installed_and_imports(r, &facts))
                    .filter_map(|r| {
                        probe_mod::smoke::run(&python, r, &cache.join("smoke"), timeout).map(|s| (r.name.clone(), s))
                    })
                    .collect();
                Ok(probe_mod::cache::Probed { facts, binaries, smoke })
            },
        )?;
        let probe_mod::cache::Probed { facts, binaries, smoke } = probed;
        let evidence = resolve::status::Evidence {
            set: &set,
            machine: &machine,
            python: &facts,
            binaries: &binaries,
            archs: &archs,
            smoke: &smoke,
            smoke_archs: &smoke_archs,
        };
        let assessments = resolve::status::assess(&evidence, &scope);
        Ok(Session {
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
                allow_replace: g.allow_replace.iter().cloned().collect(),
            },
            facts,
            binaries,
            smoke,
            smoke_archs,
            assessments,
            probe_cache,
        })
    }

    /// The installed distribution of component `name`, if any.
    pub fn installed(&self, name: &str) -> Option<&python::Dist> {
        let dist = self.set.get(name)?.dist.as_deref()?;
        self.facts.dists.get(&probe_mod::normalize(dist))
    }

    /// Verdicts for the runtime backends of the consumers in scope.
    pub fn backends(&self) -> Vec<resolve::backends::BackendVerdict> {
        resolve::backends::verdicts(&self.set, &self.machine, &self.assessments, &self.scope, &self.archs)
    }

    /// Chooses versions, then plans. A conflict comes back with its explanation.
    pub fn plan(&self, g: &Global) -> Result<Plan, resolve::solve::Conflict> {
        let mut solution = resolve::solve::solve(&self.set, &self.facts, &self.request)?;
        // Installed components outside the targets' closure whose version the solver changed
        // (allowed by --allow-replace) are part of the plan too.
        let mut scope = self.scope.clone();
        let changed: Vec<(String, Vec<String>)> = solution
            .chosen
            .iter()
            .filter(|(name, v)| {
                !scope.iter().any(|(n, _)| n == *name)
                    && self
                        .installed(name)
                        .is_some_and(|d| d.version.split('+').next() != Some(v.as_str()))
            })
            .map(|(n, _)| (n.clone(), Vec::new()))
            .collect();
        if !changed.is_empty() {
            let mut all = scope.clone();
            all.extend(changed.iter().cloned());
            scope = self.set.closure(&all);
        }
        let names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
        resolve::solve::explain_not_newest(&self.set, &self.facts, &self.request, &mut solution, &names);
        if changed.is_empty() {
            return Ok(self.plan_with(g, &solution, &scope, &self.assessments));
        }
        // Prove the extra components too (a rare path: no cache).
        let imports = resolve::status::imports_for(&self.set, &scope);
        let timeout = Duration::from_secs(g.import_timeout.max(1));
        let assessments = match python::probe(&self.python, &imports, timeout) {
            Ok(facts) => {
                let evidence = resolve::status::Evidence {
                    set: &self.set,
                    machine: &self.machine,
                    python: &facts,
                    binaries: &self.binaries,
                    archs: &self.archs,
                    smoke: &self.smoke,
                    smoke_archs: &self.smoke_archs,
                };
                resolve::status::assess(&evidence, &scope)
            }
            Err(e) => {
                return Err(resolve::solve::Conflict {
                    because: vec![format!("cannot probe the environment again: {e}")],
                    ways_out: Vec::new(),
                });
            }
        };
        Ok(self.plan_with(g, &solution, &scope, &assessments))
    }

    fn plan_with(
        &self,
        g: &Global,
        solution: &resolve::solve::Solution,
        scope: &[(String, Vec<String>)],
        assessments: &[Assessment],
    ) -> Plan {
        let mut plan = resolve::plan::make(
            &self.set,
            &self.machine,
            scope,
            assessments,
            solution,
            &PlanOptions {
                archs: self.archs.clone(),
                jobs: g.jobs,
                python: self.python.display().to_string(),
            },
        );
        if g.offline {
            // Say no now, not after the steps before it have run: a source the cache lacks
            // cannot be had offline.
            let cache = Session::cache_dir(g);
            for step in plan.steps.iter_mut().filter(|s| s.action.changes()) {
                let missing = self
                    .set
                    .get(&step.name)
                    .and_then(|r| r.source_of(step.version.as_deref()))
                    .and_then(|src| crate::build::source::cached(src, &cache).err());
                if let Some(why) = missing {
                    step.action = resolve::Action::Blocked;
                    step.reason = format!("{}; offline: {why}", step.reason);
                }
            }
        }
        plan
    }

    /// The cache directory: `--cache-dir`/`KILN_CACHE_DIR`, `$XDG_CACHE_HOME/kiln`, `~/.cache/kiln`.
    /// Always absolute: builds run in other directories.
    pub fn cache_dir(g: &Global) -> PathBuf {
        let dir = Session::cache_dir_as_given(g);
        std::path::absolute(&dir).unwrap_or(dir)
    }

    fn cache_dir_as_given(g: &Global) -> PathBuf {
        if let Some(d) = &g.cache_dir {
            return d.clone();
        }
        if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
            return PathBuf::from(x).join("kiln");
        }
        match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".cache").join("kiln"),
            None => std::env::temp_dir().join("kiln-cache"),
        }
    }
}
