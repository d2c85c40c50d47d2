//! The build spec: how one step builds — the argument lists of its `prepare` and wheel
//! commands, its environment, its build requirements and its compile jobs — rendered once, by
//! the plan, for this machine. `kiln plan` shows it and the build runs it as it is, filling in
//! only what exists once the build runs: the source and wheel directories, the build
//! requirements' overlay, kiln's own `PATH` (behind the overlay's `bin`), and where the build
//! wrote kiln's PEP 517 front end (the default wheel command).
//!
//! The jobs are the plan's: the build scheduler starts a build once its planned jobs fit the
//! CPUs and memory left (or nothing else runs), rather than handing it whatever is free. The
//! one change a build makes is downwards: a compile killed by the OOM killer is retried with
//! half the jobs, and its outcome says so.
//!
//! It deliberately ignores where the source comes from and when a build starts; and it is
//! rendered only for steps that build from source (a binary wheel has no build).

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::arch::DialectError;
use crate::compile_cache::Wiring;
use crate::recipe::inputs::InputPart;
use crate::recipe::template::{Part, Template, Var, Vars};
use crate::recipe::{Build, Input};

/// A piece of an argument or an environment value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Rendered by the plan.
    Text(String),
    /// The unpacked source tree.
    Src,
    /// Where the wheel is written.
    WheelDir,
    /// The compile jobs: the planned count, lowered only by a retry after an OOM kill.
    Jobs,
    /// The private directory the build requirements are installed into.
    Overlay,
    /// This variable of the environment kiln runs in (`PATH`).
    Inherited(String),
    /// The directory of the named build input (fetched before the build).
    Input(String),
    /// kiln's PEP 517 front end, a script the build writes beside the source: it calls the
    /// backend's `build_wheel` once, in the interpreter that runs it (no build isolation).
    FrontEnd,
}

/// One argument or environment value: pieces joined.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Arg(pub Vec<Piece>);

/// The variable that names the memory gate's directory in a build's environment (see
/// `apply::gate`).
pub const GATE_VAR: &str = "KILN_GATE";

/// The values that exist only when the build runs.
#[derive(Debug, Clone, Default)]
pub struct RunValues {
    pub src: String,
    pub wheel_dir: String,
    pub overlay: String,
    pub jobs: usize,
    pub inherited: BTreeMap<String, String>,
    /// Where the build wrote kiln's PEP 517 front end.
    pub front_end: String,
    /// The step's sccache server socket, and whether nvcc goes through it; `None`: this build
    /// runs without the compile cache (none asked for, or it cannot be used now).
    pub compile_cache: Option<(String, bool)>,
    /// Where each build input was fetched, by name (`<input NAME>` in the plan).
    pub inputs: BTreeMap<String, String>,
    /// kiln's own program and the memory gate's directory for this build; `None`: the
    /// compiles run without the gate.
    pub gate: Option<(String, String)>,
}

impl RunValues {
    /// What the plan shows in their place: `<source dir>`, `<wheel dir>`, `<build requirements>`,
    /// `$PATH`, and the planned jobs.
    pub fn placeholders(jobs: usize) -> RunValues {
        RunValues {
            src: "<source dir>".into(),
            wheel_dir: "<wheel dir>".into(),
            overlay: "<build requirements>".into(),
            jobs,
            inherited: [("PATH".to_string(), "$PATH".to_string())].into(),
            front_end: "<kiln's PEP 517 front end>".into(),
            compile_cache: Some(("<sccache socket>".into(), true)),
            inputs: BTreeMap::new(),
            gate: Some(("kiln".into(), "<gate dir>".into())),
        }
    }
}

impl Arg {
    fn text(s: &str) -> Arg {
        Arg(vec![Piece::Text(s.to_string())])
    }

    /// The template with every variable the plan knows filled in.
    fn of(t: &Template, vars: &Vars) -> Result<Arg, DialectError> {
        let mut pieces: Vec<Piece> = Vec::new();
        for part in t.parts() {
            let piece = match part {
                Part::Lit(s) => Piece::Text(s.clone()),
                Part::Var(Var::Src) => Piece::Src,
                Part::Var(Var::WheelDir) => Piece::WheelDir,
                Part::Var(Var::Jobs) => Piece::Jobs,
                Part::Var(v) => Piece::Text(vars.get(*v)?),
            };
            match (pieces.last_mut(), piece) {
                (Some(Piece::Text(a)), Piece::Text(b)) => a.push_str(&b),
                (_, p) => pieces.push(p),
            }
        }
        Ok(Arg(pieces))
    }

    pub fn render(&self, v: &RunValues) -> String {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Piece::Text(s) => out.push_str(s),
                Piece::Src => out.push_str(&v.src),
                Piece::WheelDir => out.push_str(&v.wheel_dir),
                Piece::Jobs => out.push_str(&v.jobs.to_string()),
                Piece::Overlay => out.push_str(&v.overlay),
                Piece::Inherited(name) => out.push_str(v.inherited.get(name).map_or("", String::as_str)),
                Piece::Input(name) => match v.inputs.get(name) {
                    Some(dir) => out.push_str(dir),
                    None => out.push_str(&format!("<input {name}>")),
                },
                Piece::FrontEnd => out.push_str(&v.front_end),
            }
        }
        out
    }
}

/// How one step builds, as the plan rendered it.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildSpec {
    /// Compile jobs (`{jobs}`): `--jobs`, else min(CPUs, available memory / memory per job).
    pub jobs: usize,
    /// Memory one job takes, which the scheduler reserves for each.
    pub memory_per_job: Option<u64>,
    /// The memory the build's CUDA compiles may hold together, where the plan sized its jobs
    /// by figures per translation unit: the scheduler reserves it for the build (instead of
    /// jobs times `memory_per_job`) and the memory gate keeps the compiles within it.
    pub memory_limit: Option<u64>,
    /// The name this build's figures per translation unit are kept under on this machine: the
    /// component and its target archs (`flash-attn@9.0`; a unit compiled for other archs takes
    /// other memory).
    pub memory_key: String,
    /// This machine's nvcc: the memory gate runs it (`PYTORCH_NVCC`,
    /// `CMAKE_CUDA_COMPILER_LAUNCHER`); `None` without a CUDA toolkit.
    pub nvcc: Option<String>,
    /// Where that figure came from (the recipe, or a build measured on this machine), as the
    /// plan shows it; `None` when there is no figure.
    pub memory_from: Option<String>,
    /// PEP 508 requirements installed into the overlay before anything runs.
    pub requires: Vec<String>,
    /// A Cargo manifest (relative to the source) read with `cargo metadata` first.
    pub cargo_manifest: Option<String>,
    /// The environment of every command: the recipe's, then the overlay's `PYTHONPATH` and `PATH`.
    pub env: BTreeMap<String, Arg>,
    pub prepare: Vec<Vec<Arg>>,
    pub wheel: Vec<Arg>,
    /// The recipe's `[build] stall` and `limit` (the command line's win when given).
    pub stall: Option<std::time::Duration>,
    pub limit: Option<std::time::Duration>,
    /// The compile cache (`--compile-cache`): the backend as shown, and how sccache is put in
    /// front of the compilers; its variables join `env` (a recipe's own value wins).
    pub compile_cache: Option<(String, Wiring)>,
    /// The build inputs this build needs for its target archs, fetched before it starts; their
    /// variables are in `env`.
    pub inputs: Vec<Input>,
    /// What the upstream build compiles for the target archs, where the recipe lists its
    /// targets (`[[build.targets]]`): shown by the plan, never read by the build.
    pub targets: Vec<crate::recipe::targets::PlannedTarget>,
    /// The build commands run with the network denied (see `apply::sandbox`).
    pub deny_network: bool,
    /// Tools kiln brings for this build (`[[requires.tools]]` wheels): unpacked before it runs,
    /// their directories on `PATH` (see [`super::tools`]).
    pub tools: Vec<super::tools::Brought>,
}

/// Why a step's build cannot be rendered on this machine.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("cannot set {key}: {error}")]
    Env { key: String, error: DialectError },
    #[error("cannot render a prepare command: {0}")]
    Prepare(DialectError),
    #[error("cannot render the wheel command: {0}")]
    Wheel(DialectError),
}

impl BuildSpec {
    /// Renders the recipe's `[build]` with `vars` (their `src`, `wheel_dir` and `jobs` are not
    /// read: those stay pieces for the build to fill in).
    pub fn new(build: &Build, vars: &Vars) -> Result<BuildSpec, SpecError> {
        let mut env = BTreeMap::new();
        for (key, t) in &build.env {
            let arg = Arg::of(t, vars).map_err(|error| SpecError::Env {
                key: key.clone(),
                error,
            })?;
            env.insert(key.clone(), arg);
        }
        // Each input's variables, for the archs being built; a variable that several inputs (or
        // the recipe's env) set gets their values joined by a space (`CMAKE_ARGS`).
        let inputs: Vec<Input> = build
            .inputs
            .iter()
            .filter(|i| i.needed_for(&vars.archs))
            .cloned()
            .collect();
        for input in &inputs {
            for (key, value) in &input.env {
                let mut arg = Vec::new();
                for part in value.parts() {
                    arg.push(match part {
                        InputPart::Lit(s) => Piece::Text(s.clone()),
                        InputPart::Path => Piece::Input(input.name.clone()),
                    });
                }
                match env.get_mut(key) {
                    Some(Arg(pieces)) => {
                        pieces.push(Piece::Text(" ".into()));
                        pieces.extend(arg);
                    }
                    None => {
                        env.insert(key.clone(), Arg(arg));
                    }
                }
            }
        }
        // The toolkit kiln judged is the one the build uses: `CUDA_HOME` (read by torch's
        // extension builder and flashinfer) and its `bin/` first on `PATH`, for the builds that
        // find nvcc there instead (CMake's FindCUDA, which torch's Caffe2/public/cuda.cmake
        // runs, ignores CUDA_HOME and failed on vLLM 0.26.0 with "CUDA_TOOLKIT_ROOT_DIR not
        // found" where nvcc was only under CUDA_HOME). A recipe's own values win.
        let cuda_bin = vars
            .cuda_home
            .as_ref()
            .map(|h| format!("{}/bin:", h.trim_end_matches('/')));
        if let Some(home) = &vars.cuda_home {
            env.entry("CUDA_HOME".into()).or_insert_with(|| Arg::text(home));
        }
        let mut path = Vec::new();
        if !build.requires.is_empty() {
            env.insert("PYTHONPATH".into(), Arg(vec![Piece::Overlay]));
            path.extend([Piece::Overlay, Piece::Text("/bin:".into())]);
        }
        path.extend(cuda_bin.map(Piece::Text));
        if !path.is_empty() && !env.contains_key("PATH") {
            path.push(Piece::Inherited("PATH".into()));
            env.insert("PATH".into(), Arg(path));
        }
        let command = |ts: &[Template]| ts.iter().map(|t| Arg::of(t, vars)).collect::<Result<Vec<_>, _>>();
        let prepare = build
            .prepare
            .iter()
            .map(|c| command(c))
            .collect::<Result<_, _>>()
            .map_err(SpecError::Prepare)?;
        let wheel = match &build.wheel {
            Some(ts) => command(ts).map_err(SpecError::Wheel)?,
            None => default_wheel(&vars.python),
        };
        Ok(BuildSpec {
            jobs: vars.jobs,
            memory_per_job: build.memory_per_job,
            memory_limit: None,
            memory_key: String::new(),
            nvcc: None,
            memory_from: build.memory_per_job.map(|_| "the recipe's memory_per_job".to_string()),
            requires: build.requires.clone(),
            cargo_manifest: build.cargo_manifest.clone(),
            env,
            prepare,
            wheel,
            stall: build.stall,
            limit: build.limit,
            compile_cache: None,
            deny_network: build.denies_network(),
            inputs,
            targets: build.targets.iter().map(|t| t.planned(&vars.archs)).collect(),
            tools: Vec::new(),
        })
    }

    /// The memory the build holds while it compiles: the limit its gate keeps to, else its
    /// jobs times the memory per job.
    pub fn memory(&self) -> Option<u64> {
        self.memory_limit
            .or_else(|| self.memory_per_job.map(|p| p.saturating_mul(self.jobs as u64)))
    }

    /// The environment with the run's values filled in.
    pub fn env_with(&self, v: &RunValues) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = self.env.iter().map(|(k, a)| (k.clone(), a.render(v))).collect();
        if let (Some((_, wiring)), Some((socket, cuda))) = (&self.compile_cache, &v.compile_cache) {
            // The recipe's own C++ compiler runs behind the launcher; its other values win.
            let recipe_cxx = env.remove("CXX");
            for (k, val) in wiring.env(socket, *cuda, recipe_cxx.as_deref()) {
                env.entry(k).or_insert(val);
            }
        }
        if let (Some(nvcc), Some((kiln, dir))) = (&self.nvcc, &v.gate) {
            // The memory gate in front of each CUDA compile, and of sccache where it wraps nvcc;
            // a recipe's own value of either variable wins.
            let sccache = v
                .compile_cache
                .as_ref()
                .filter(|(_, cuda)| *cuda)
                .and(self.compile_cache.as_ref());
            let sccache = sccache.map(|(_, w)| w.sccache.as_str());
            if !self.env.contains_key("PYTORCH_NVCC") {
                // torch writes it into build.ninja, whose commands a shell runs: one word each.
                let q = crate::process::quote;
                let behind = sccache.map(|s| format!("{} ", q(s))).unwrap_or_default();
                env.insert(
                    "PYTORCH_NVCC".into(),
                    format!("{} gate -- {behind}{}", q(kiln), q(nvcc)),
                );
            }
            if !self.env.contains_key("CMAKE_CUDA_COMPILER_LAUNCHER") {
                let behind = sccache.map(|s| format!(";{s}")).unwrap_or_default();
                env.insert("CMAKE_CUDA_COMPILER_LAUNCHER".into(), format!("{kiln};gate;--{behind}"));
            }
            env.insert(GATE_VAR.into(), dir.clone());
        }
        env
    }

    /// A command's argument list with the run's values filled in.
    pub fn argv(command: &[Arg], v: &RunValues) -> Vec<String> {
        command.iter().map(|a| a.render(v)).collect()
    }

    /// The environment as `kiln plan` shows it.
    pub fn shown_env(&self) -> BTreeMap<String, String> {
        self.env_with(&RunValues::placeholders(self.jobs))
    }
}

/// `{python} <kiln's PEP 517 front end> {wheel_dir} {src}`: the backend's `build_wheel` runs
/// once (pip wheel asks for the metadata first, which runs a `setup.py` twice), with the build
/// requirements and the environment's packages on the path as `--no-build-isolation` has them,
/// and everything it prints (compiler lines, ninja's `[n/N]`) goes to the step log as it comes.
fn default_wheel(python: &str) -> Vec<Arg> {
    vec![
        Arg::text(python),
        Arg(vec![Piece::FrontEnd]),
        Arg(vec![Piece::WheelDir]),
        Arg(vec![Piece::Src]),
    ]
}

/// Flattened into a step: `env` and `jobs` as they always were, and the commands it runs.
impl Serialize for BuildSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let shown = RunValues::placeholders(self.jobs);
        let mut m = s.serialize_map(None)?;
        if !self.env.is_empty() {
            m.serialize_entry("env", &self.env_with(&shown))?;
        }
        m.serialize_entry("jobs", &self.jobs)?;
        if let Some(bytes) = self.memory_per_job {
            m.serialize_entry("memory_per_job", &bytes)?;
            m.serialize_entry("memory_per_job_from", &self.memory_from)?;
        }
        if let Some(bytes) = self.memory_limit {
            m.serialize_entry("memory_limit", &bytes)?;
        }
        if let Some((backend, _)) = &self.compile_cache {
            m.serialize_entry("compile_cache", backend)?;
        }
        if !self.requires.is_empty() {
            m.serialize_entry("build_requires", &self.requires)?;
        }
        if let Some(c) = &self.cargo_manifest {
            m.serialize_entry("cargo_manifest", c)?;
        }
        if !self.tools.is_empty() {
            m.serialize_entry("tools", &self.tools)?;
        }
        if !self.prepare.is_empty() {
            let prepare: Vec<Vec<String>> = self.prepare.iter().map(|c| BuildSpec::argv(c, &shown)).collect();
            m.serialize_entry("prepare", &prepare)?;
        }
        m.serialize_entry("wheel_command", &BuildSpec::argv(&self.wheel, &shown))?;
        if !self.inputs.is_empty() {
            m.serialize_entry("inputs", &self.inputs)?;
        }
        if !self.targets.is_empty() {
            m.serialize_entry("targets", &self.targets)?;
        }
        if self.deny_network {
            m.serialize_entry("network", "denied")?;
        }
        m.end()
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
