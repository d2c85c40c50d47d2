//! Subcommands: each turns parsed arguments into calls on the core and hands the results to
//! `report`. Shared set-up (recipes, interpreter, machine, target archs) lives in [`Session`].

mod arch_cmd;
pub use arch_cmd::ArchFile;
mod doctor;
mod install;
mod plan;
mod recipes;

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
        Command::Install(a) => install::run(&cli.global, &a.targets.targets, a.dry_run),
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
pub fn parse_targets(set: &RecipeSet, targets: &[String]) -> Result<Vec<(String, Vec<String>)>, Failure> {
    if targets.is_empty() {
        return Ok(set.recipes.keys().map(|k| (k.clone(), Vec::new())).collect());
    }
    let mut out = Vec::new();
    for t in targets {
        let req = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(t).map_err(|e| {
            Failure::Usage(format!(
                "`{t}` is not a target: {}",
                e.to_string().lines().next().unwrap_or("")
            ))
        })?;
        if req.version_or_url.is_some() || req.marker != pep508_rs::MarkerTree::TRUE {
            return Err(Failure::Usage(format!(
                "`{t}`: version pins and markers on targets are not supported yet; kiln installs the version its recipe pins"
            )));
        }
        let name = req.name.to_string();
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
    Ok(out)
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
    pub facts: PythonFacts,
    pub binaries: std::collections::BTreeMap<String, crate::probe::binaries::Binaries>,
    pub assessments: Vec<Assessment>,
    /// Whether the Python facts came from the probe cache.
    pub probe_cache: probe_mod::cache::CacheUse,
}

impl Session {
    pub fn open(g: &Global, targets: &[String]) -> Result<Session, Failure> {
        let set = load_recipes(g)?;
        let wanted = parse_targets(&set, targets)?;
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
        let (facts, binaries, probe_cache) =
            probe_mod::cache::python_facts(&cache, &python, &imports, &dists, g.refresh, || {
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
                Ok((facts, binaries))
            })?;
        let evidence = resolve::status::Evidence {
            set: &set,
            machine: &machine,
            python: &facts,
            binaries: &binaries,
            archs: &archs,
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
            facts,
            binaries,
            assessments,
            probe_cache,
        })
    }

    /// Verdicts for the runtime backends of the consumers in scope.
    pub fn backends(&self) -> Vec<resolve::backends::BackendVerdict> {
        resolve::backends::verdicts(&self.set, &self.machine, &self.assessments, &self.scope, &self.archs)
    }

    pub fn plan(&self, g: &Global) -> Plan {
        resolve::plan::make(
            &self.set,
            &self.machine,
            &self.scope,
            &self.assessments,
            &PlanOptions {
                archs: self.archs.clone(),
                jobs: g.jobs,
                python: self.python.display().to_string(),
            },
        )
    }

    /// The cache directory: `--cache-dir`/`KILN_CACHE_DIR`, `$XDG_CACHE_HOME/kiln`, `~/.cache/kiln`.
    pub fn cache_dir(g: &Global) -> PathBuf {
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
