//! The plan: one step per component in dependency order, each with the action kiln will take
//! and the reason for it, and, for a build from source, its [`BuildSpec`]: the commands,
//! environment and compile jobs the build runs as they are (see [`super::spec`]).
//!
//! Rules: `ok` components are kept unless a dependency they link against (`abi = true`) is
//! replaced; `missing`/`broken`/`outdated` ones are built or installed; a step that needs what
//! kiln cannot provide (a toolkit, a tool on PATH, a blocked dependency) is `blocked` with the
//! fix, and nothing is built towards a dead end. Version choice across the stack (a real solver)
//! is deliberately not done here yet; the recipe's pinned version is used.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::reason::Reason;
use super::spec::BuildSpec;
use super::status::{Assessment, Status};
use crate::arch::Arch;
use crate::probe::MachineFacts;
use crate::recipe::template::Vars;
use crate::recipe::{Kind, RecipeSet, Source};

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Already good: nothing to do.
    Keep,
    /// Build from source and install.
    Build,
    /// Build again from source and replace what is installed.
    Rebuild,
    /// Install a binary wheel from an index.
    Install,
    /// Replace an installed binary wheel.
    Reinstall,
    /// Cannot proceed: needs something kiln does not provide.
    Blocked,
    /// Cannot work on this target at all.
    Unsupported,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Keep => "keep",
            Action::Build => "build",
            Action::Rebuild => "rebuild",
            Action::Install => "install",
            Action::Reinstall => "reinstall",
            Action::Blocked => "blocked",
            Action::Unsupported => "unsupported",
        }
    }

    /// Whether the step changes the environment.
    pub fn changes(self) -> bool {
        matches!(
            self,
            Action::Build | Action::Rebuild | Action::Install | Action::Reinstall
        )
    }
}

/// One step of the plan. Its JSON form is in `report::json`: these fields, the typed `reasons`
/// and the `reason` `report::reason` renders from them.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub action: Action,
    /// Why the step does what it does, in order: what decides it first, then each thing that
    /// stops or shapes it.
    pub reasons: Vec<Reason>,
    pub status: Status,
    /// The version the step installs (for steps that change something).
    pub version: Option<String>,
    pub features: Vec<String>,
    /// How it builds from source, rendered for this machine: what `kiln plan` shows (its `env`
    /// and `jobs` among the step's fields) and what the build runs.
    pub build: Option<BuildSpec>,
    /// `[runtime] env` rendered for the target archs and this machine: the defaults the install
    /// writes into the environment's run-time file (`probe::runtime`).
    pub runtime_env: BTreeMap<String, String>,
    /// Wheel or build: the decision on the prebuilt wheel the recipe offers for this version,
    /// with its evidence (`None` when it offers none or nothing changes).
    pub prebuilt: Option<super::wheel_choice::WheelDecision>,
}

impl Step {
    /// A step that keeps what is there, until the plan decides otherwise.
    fn keep(name: &str, status: Status, features: &[String]) -> Step {
        Step {
            name: name.to_string(),
            action: Action::Keep,
            reasons: Vec::new(),
            status,
            version: None,
            features: features.to_vec(),
            build: None,
            runtime_env: BTreeMap::new(),
            prebuilt: None,
        }
    }

    /// The build environment as `kiln plan` shows it (placeholders for the run's paths).
    pub fn env(&self) -> BTreeMap<String, String> {
        self.build.as_ref().map(BuildSpec::shown_env).unwrap_or_default()
    }
}

/// The whole plan, in execution order.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub archs: Vec<Arch>,
    pub steps: Vec<Step>,
    /// The version chosen for each component (by the solver).
    pub versions: BTreeMap<String, String>,
}

impl Plan {
    pub fn is_blocked(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s.action, Action::Blocked | Action::Unsupported))
    }

    pub fn changes(&self) -> usize {
        self.steps.iter().filter(|s| s.action.changes()).count()
    }
}

/// Settings that shape the plan.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    pub archs: Vec<Arch>,
    pub jobs: Option<usize>,
    pub python: String,
    /// `--compile-cache`: the backend as shown and the sccache wiring of every build.
    pub compile_cache: Option<(String, crate::compile_cache::Wiring)>,
    /// Where kiln keeps the tools it brings for builds (`[[requires.tools]]` wheels).
    pub tools: super::tools::ToolPlace,
    /// Wheel-or-build decisions made for the plan's versions, by component (see
    /// [`super::wheel_choice`]): a step whose wheel qualifies installs it instead of building.
    pub prebuilt: BTreeMap<String, super::wheel_choice::WheelDecision>,
    /// Why a component's wheel (and a build of the same source) cannot be proven on this
    /// machine, by component ([`super::provable`]): its step is `blocked`.
    pub unprovable: BTreeMap<String, Reason>,
}

/// How many compile jobs fit: `--jobs`, else min(CPUs, available memory / memory per job).
pub fn jobs_for(memory_per_job: Option<u64>, machine: &MachineFacts, explicit: Option<usize>) -> usize {
    jobs_within(memory_per_job, machine.cpus, machine.memory_available, explicit)
}

/// Compile jobs that fit `cpus` and `memory` at `memory_per_job` each (at least one); `explicit`
/// (`--jobs`) wins. The plan asks with the whole machine; the build runs what the plan chose.
pub fn jobs_within(memory_per_job: Option<u64>, cpus: usize, memory: Option<u64>, explicit: Option<usize>) -> usize {
    if let Some(j) = explicit {
        return j.max(1);
    }
    let by_mem = match (memory_per_job, memory) {
        (Some(per), Some(avail)) if per > 0 => (avail / per) as usize,
        _ => cpus,
    };
    cpus.min(by_mem).max(1)
}

/// Makes the plan for `scope` (closure order) from the assessments.
pub fn make(
    set: &RecipeSet,
    machine: &MachineFacts,
    scope: &[(String, Vec<String>)],
    assessments: &[Assessment],
    solution: &super::solve::Solution,
    opts: &PlanOptions,
) -> Plan {
    let by_name: BTreeMap<&str, &Assessment> = assessments.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut changing: BTreeSet<String> = BTreeSet::new();
    // Component that cannot be provided -> (the root cause's component, its step's reasons).
    let mut stuck: BTreeMap<String, (String, Vec<Reason>)> = BTreeMap::new();
    let mut steps = Vec::new();
    for (name, feats) in scope {
        let (Some(r), Some(a)) = (set.get(name), by_name.get(name.as_str())) else {
            continue;
        };
        let mut step = Step::keep(name, a.status, feats);
        let deps: Vec<_> = r.depends_with(feats).collect();
        let abi_changed: Vec<&str> = deps
            .iter()
            .filter(|d| d.abi && changing.contains(&d.name))
            .map(|d| d.name.as_str())
            .collect();
        // A prebuilt wheel that qualifies needs no toolkit: only a build does.
        let decision = opts.prebuilt.get(name.as_str());
        let wheel = decision.is_some_and(|d| d.install);
        let stuck_dep = deps
            .iter()
            .filter(|d| !wheel || set.get(&d.name).is_none_or(|x| x.kind != Kind::CudaToolkit))
            .find_map(|d| stuck.get(&d.name).map(|root| (d.name.clone(), root.clone())));

        // The version the solver chose, against the one installed (local labels ignored).
        let chosen = solution.chosen.get(name).map(String::as_str);
        let installed = a.version.as_deref().map(|v| v.split('+').next().unwrap_or(v));
        let replaces = matches!((chosen, installed), (Some(c), Some(i)) if c != i);
        let wants_change = match a.status {
            _ if replaces => true,
            Status::Ok => !abi_changed.is_empty(),
            Status::Outdated | Status::Unsupported => false,
            _ => true,
        };
        // Installed, but blocked by what is not kiln's to provide (a driver too old for its CUDA
        // runtime): installing the same thing again would not help. A JIT proof that could not
        // run blocks nothing: the component imports, and an install says afterwards.
        let driver_blocked = a
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::DriverTooOld { .. } | Reason::DriverCannotDrive { .. }));
        // Holds CUDA code whatever its binaries turn out to be: built with the toolkit, or a
        // wheel the recipe says is built for a CUDA runtime.
        let cuda = deps
            .iter()
            .any(|d| set.get(&d.name).is_some_and(|x| x.kind == Kind::CudaToolkit))
            || r.versions.iter().any(|v| v.runtime_cuda.is_some());
        let assessed = || a.reasons.clone();
        if r.kind == Kind::CudaToolkit {
            if a.status != Status::Ok {
                step.action = Action::Blocked;
            }
            step.reasons = vec![Reason::Assessed { reasons: assessed() }];
        } else if a.status == Status::Unsupported && !replaces {
            step.action = Action::Unsupported;
            step.reasons = vec![Reason::Assessed { reasons: assessed() }];
        } else if a.status == Status::Blocked && !replaces && driver_blocked {
            step.action = Action::Blocked;
            step.reasons = vec![Reason::Assessed { reasons: assessed() }];
        } else if !wants_change && a.status == Status::Outdated {
            step.reasons = vec![Reason::KeptOutdated {
                component: name.clone(),
                version: a.version.clone().unwrap_or_else(|| "?".into()),
                reasons: assessed(),
            }];
        } else if !wants_change {
            step.reasons = vec![Reason::Keep { reasons: assessed() }];
        } else if let Some((dep, (root, why))) = stuck_dep {
            step.prebuilt = decision.cloned();
            step.action = Action::Blocked;
            let why = if dep == root { why } else { Vec::new() };
            step.reasons = vec![Reason::NeedsBlocked { dep, root, why }];
        } else {
            step.reasons = vec![change_reason(a, chosen, replaces, &abi_changed)];
            if let Some(note) = solution.not_newest.get(name) {
                step.reasons.push(Reason::NotNewest { note: note.clone() });
            }
            change(&mut step, r, chosen, replaces, cuda, machine, opts);
        }
        match step.action {
            Action::Blocked | Action::Unsupported => {
                let root = stuck_root(&stuck, &deps).unwrap_or_else(|| (name.clone(), step.reasons.clone()));
                stuck.insert(name.clone(), root);
            }
            a if a.changes() => {
                changing.insert(name.clone());
            }
            _ => {}
        }
        steps.push(step);
    }
    Plan {
        archs: opts.archs.clone(),
        steps,
        versions: solution.chosen.clone(),
    }
}

/// A step that changes what is installed: its action, version and build, or what blocks it
/// (added to `step.reasons`, which say why it changes).
fn change(
    step: &mut Step,
    r: &crate::recipe::Recipe,
    chosen: Option<&str>,
    replaces: bool,
    cuda: bool,
    machine: &MachineFacts,
    opts: &PlanOptions,
) {
    let decision = opts.prebuilt.get(&r.name).cloned();
    let prebuilt = decision.as_ref().is_some_and(|d| d.install);
    step.prebuilt = decision;
    let binary = prebuilt || matches!(r.source, Some(Source::Wheel { .. }));
    step.action = match (binary, step.status) {
        (true, _) if replaces => Action::Reinstall,
        (false, _) if replaces => Action::Rebuild,
        (true, Status::Missing) => Action::Install,
        (true, _) => Action::Reinstall,
        (false, Status::Missing) => Action::Build,
        (false, _) => Action::Rebuild,
    };
    step.version = chosen
        .map(str::to_string)
        .or_else(|| r.version.as_ref().map(|v| v.to_string()));
    // A binary wheel built for a newer CUDA major than the driver here supports cannot run:
    // refused now, not installed and then found `blocked` (the same verdict `doctor` gives).
    // And a CUDA component for a GPU generation the driver cannot drive cannot run, whatever
    // its binaries turn out to hold: both refused before anything is fetched or built.
    let refused = super::driver::step_refusals(r, step.version.as_deref(), cuda, machine, &opts.archs);
    if !refused.is_empty() {
        step.action = Action::Blocked;
        step.reasons.extend(refused);
        return;
    }
    // A qualifying prebuilt wheel needs nothing a build needs (compiler, toolkit, tools).
    let brought = if prebuilt {
        Vec::new()
    } else {
        match build_blockers(r, step.version.as_deref(), machine, opts) {
            Ok(b) => b,
            Err(blocker) => {
                step.action = Action::Blocked;
                step.reasons.push(*blocker);
                return;
            }
        }
    };
    // After the build's own blockers (a build that cannot start says so first): a wheel, or a
    // build of the same source, whose import needs a driver this machine lacks.
    if let Some(why) = opts.unprovable.get(&r.name) {
        step.action = Action::Blocked;
        step.reasons.push(Reason::Unprovable {
            because: Box::new(why.clone()),
        });
        return;
    }
    match runtime_env(r, step.version.as_deref(), machine, opts) {
        Ok(env) => step.runtime_env = env,
        Err(error) => {
            step.action = Action::Blocked;
            step.reasons.push(Reason::CannotRender { error });
            return;
        }
    }
    if !binary {
        match build_spec(r, step.version.as_deref(), machine, opts) {
            Ok(mut spec) => {
                spec.bring_tools(brought);
                step.build = Some(spec);
            }
            Err(e) => {
                step.action = Action::Blocked;
                step.reasons.push(Reason::CannotRender { error: e.to_string() });
            }
        }
    }
}

/// Why a step changes what is installed.
fn change_reason(a: &Assessment, chosen: Option<&str>, replaces: bool, abi_changed: &[&str]) -> Reason {
    let chosen = chosen.unwrap_or("?").to_string();
    match a.status {
        _ if replaces => match &a.installed_as {
            // Installed under another name: that distribution goes, the component's comes.
            Some(other) => Reason::ReplaceOther {
                component: a.name.clone(),
                other: other.clone(),
                chosen,
            },
            None => Reason::Replace {
                have: a.version.clone().unwrap_or_else(|| "?".into()),
                chosen,
            },
        },
        Status::Ok => Reason::AbiChanged {
            deps: abi_changed.iter().map(|d| d.to_string()).collect(),
        },
        status => Reason::Change {
            status,
            reasons: a.reasons.clone(),
        },
    }
}

/// The variables a recipe's templates see for `version` on this machine (run-time paths empty).
fn vars(r: &crate::recipe::Recipe, version: Option<&str>, machine: &MachineFacts, opts: &PlanOptions) -> Vars {
    let toolkit = machine.cuda_toolkit.as_ref();
    Vars {
        python: opts.python.clone(),
        jobs: jobs_for(r.build.memory_per_job, machine, opts.jobs),
        version: version.unwrap_or_default().to_string(),
        cuda_home: toolkit.and_then(|t| t.home.as_ref()).map(|h| h.display().to_string()),
        cuda_version: toolkit.map(|t| t.version.clone()),
        archs: opts.archs.clone(),
        // Known only when the build runs: the spec keeps them as pieces.
        src: String::new(),
        wheel_dir: String::new(),
    }
}

/// The recipe's `[runtime] env` rendered for this machine and the target archs.
pub fn runtime_env(
    r: &crate::recipe::Recipe,
    version: Option<&str>,
    machine: &MachineFacts,
    opts: &PlanOptions,
) -> Result<BTreeMap<String, String>, String> {
    let vars = vars(r, version, machine, opts);
    r.runtime_env
        .iter()
        .map(|(k, t)| {
            t.render(&vars)
                .map(|v| (k.clone(), v))
                .map_err(|e| format!("cannot set {k} = \"{t}\" for run time ([runtime] env): {e}"))
        })
        .collect()
}

/// The recipe's `[build]` rendered for this machine: what the build of `version` will run.
fn build_spec(
    r: &crate::recipe::Recipe,
    version: Option<&str>,
    machine: &MachineFacts,
    opts: &PlanOptions,
) -> Result<BuildSpec, super::spec::SpecError> {
    // The build of that version: its own `prepare` and build inputs where it has them.
    let v = version.and_then(|v| v.parse::<pep440_rs::Version>().ok());
    let mut spec = BuildSpec::new(&r.build_of(v.as_ref()), &vars(r, version, machine, opts))?;
    spec.compile_cache = opts.compile_cache.clone();
    let archs: BTreeSet<String> = opts.archs.iter().map(ToString::to_string).collect();
    spec.memory_key = format!("{}@{}", r.name, Vec::from_iter(archs).join(","));
    // The memory gate runs this machine's nvcc (see `apply::gate`).
    let home = machine.cuda_toolkit.as_ref().and_then(|t| t.home.as_ref());
    spec.nvcc = home.map(|h| h.join("bin").join("nvcc").display().to_string());
    Ok(spec)
}

fn stuck_root(
    stuck: &BTreeMap<String, (String, Vec<Reason>)>,
    deps: &[&crate::recipe::Dependency],
) -> Option<(String, Vec<Reason>)> {
    deps.iter().find_map(|d| stuck.get(&d.name).cloned())
}

/// What stops a build before it starts: a missing tool kiln cannot bring, a toolkit outside the
/// recipe's range. Otherwise the tools kiln brings for it (see [`super::tools`]).
fn build_blockers(
    r: &crate::recipe::Recipe,
    version: Option<&str>,
    machine: &MachineFacts,
    opts: &PlanOptions,
) -> Result<Vec<super::tools::Brought>, Box<Reason>> {
    let archs: &[Arch] = &opts.archs;
    let brought = super::tools::provide(r, &opts.tools, &|t| which::which(t).is_ok())
        .map_err(|why| Box::new(Reason::BuildNeedsTool { why }))?;
    let toolkit = machine.cuda_toolkit.as_ref();
    let needs_toolkit = |req: &semver::VersionReq, source: Option<&String>| {
        let have = toolkit.map(|tk| tk.version.to_string());
        let fits = toolkit.is_some_and(|tk| req.matches(&tk.version));
        (!fits).then(|| Reason::BuildNeedsToolkit {
            req: req.to_string(),
            have,
            source: source.cloned(),
        })
    };
    for rule in r
        .requires
        .rules
        .iter()
        .filter(|rule| archs.iter().any(|a| rule.arch.contains(a)))
    {
        if let Some(blocker) = rule
            .cuda_req
            .as_ref()
            .and_then(|req| needs_toolkit(req, Some(&rule.why)))
        {
            return Err(Box::new(blocker));
        }
    }
    // The version's own compiler floor, else the recipe's.
    let own = version
        .and_then(|v| v.parse::<pep440_rs::Version>().ok())
        .and_then(|v| r.version_entry(&v).and_then(|e| e.gcc.clone()));
    if let Some(req) = own.as_ref().or(r.requires.gcc_req.as_ref()) {
        let have = machine
            .host_compiler
            .as_ref()
            .and_then(|c| crate::probe::machine::compiler_version(&c.value));
        if have.as_ref().is_none_or(|v| !req.matches(v)) {
            return Err(Box::new(Reason::BuildNeedsCompiler {
                req: req.to_string(),
                have: have.map(|v| v.to_string()),
            }));
        }
    }
    if let Some(blocker) = r.requires.cuda_req.as_ref().and_then(|req| needs_toolkit(req, None)) {
        return Err(Box::new(blocker));
    }
    if let Some(blocker) = toolkit.and_then(|tk| super::toolkit_parts::blocker(&r.requires.toolkit, tk)) {
        return Err(Box::new(blocker));
    }
    Ok(brought)
}
