//! Apply: carries out a [`Plan`](crate::resolve::Plan) on an environment. For each step that changes something: get the source, build a
//! wheel (with build requirements in a private overlay, never in the environment), back up what
//! is installed, install the wheel, and prove it with a fresh probe of its imports (and its
//! smoke test) before any dependent starts. Builds whose dependencies are installed run side by
//! side within the CPU and memory budget ([`schedule`]); installs run one at a time. A failed
//! step leaves the environment as it was for that component and no new build starts.
//!
//! A verified wheel is kept in the wheel cache ([`wheels`]); a later build with the same inputs,
//! on this node or another sharing the cache, installs it instead of compiling.
//!
//! Each build runs the plan's [`BuildSpec`](crate::resolve::BuildSpec) as it is (commands,
//! environment, jobs), filling in only the run's directories. The parts: `queue` runs the plan
//! (who builds when, installs one at a time), `step` gets the source and the wheel (from the
//! cache or `wheel`), `commit` installs, verifies, records and restores, [`failure`] says what
//! went wrong as data.
//!
//! What it keeps in the cache (wheel entries, AOT modules, locks, the run's snapshot, unpacked
//! archives) it keeps through [`crate::store`].
//!
//! Progress goes through the [`Reporter`] trait; this module never prints. It deliberately
//! ignores choosing versions and deciding what needs building (that is the plan's job): it
//! carries out the steps it is given.

mod batch;
mod blame;
mod commit;
pub mod compile;
pub mod events;
pub mod failure;
mod fate;
pub mod gate;
pub mod guarded;
pub mod inputs;
pub mod install;
pub mod memory;
pub mod overlay;
pub mod owned;
pub mod prebuilt;
pub mod progress;
mod queue;
mod replace;
pub mod sandbox;
pub mod schedule;
pub mod source;
mod step;
mod tools;
pub mod txn;
pub mod unit_memory;
mod wheel;
mod wheel_files;
/// The wheel cache lives in the store; builds reach it here.
pub use crate::store::wheels;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::probe::MachineFacts;
use crate::probe::python::PythonFacts;
use crate::recipe::RecipeSet;
use crate::resolve::{Action, Step};
use install::Installer;

pub use failure::{BuildFailure, Hint, Restored, StepError, WheelFate};
pub use queue::execute;

/// Where a build is in its life, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Fetch,
    BuildRequires,
    Prepare,
    Wheel,
    Install,
    Verify,
    Restore,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Fetch => "fetch",
            Phase::BuildRequires => "build-requires",
            Phase::Prepare => "prepare",
            Phase::Wheel => "wheel",
            Phase::Install => "install",
            Phase::Verify => "verify",
            Phase::Restore => "restore",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Receives progress. Implemented by the terminal front end; core code only calls it.
pub trait Reporter {
    fn step_started(&self, step: &Step);
    fn phase(&self, step: &Step, phase: Phase, detail: &str);
    fn step_finished(&self, step: &Step, outcome: &Outcome);
    /// Bytes of a download so far, and the total when the server said it.
    fn transfer(&self, _step: &Step, _done: u64, _total: Option<u64>) {}
    /// Something went wrong that does not fail the step (the compile cache is down).
    fn warning(&self, _step: &Step, _text: &str) {}
    /// How far the wheel build's compile is: units done, of the total when the build said it
    /// (ninja's and CMake's `[n/N]`), else files compiled so far ([`progress`]).
    fn progress(&self, _step: &Step, _done: u64, _total: Option<u64>) {}
    /// What a wheel command that ran to the end took: its process group's peak resident memory
    /// (bytes) and the compile jobs it ran with ([`memory`]).
    fn measured(&self, _step: &Step, _peak: u64, _jobs: usize) {}
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepResult {
    /// It changed the environment, verified.
    Done,
    /// Nothing to do: kept as it is.
    Kept,
    /// It failed (the environment was restored).
    Failed,
    /// It was installed and verified, then rolled back with a later step that failed (the run
    /// is one transaction unless `--keep-done`).
    RolledBack,
}

impl StepResult {
    pub fn as_str(self) -> &'static str {
        match self {
            StepResult::Done => "done",
            StepResult::Kept => "kept",
            StepResult::Failed => "failed",
            StepResult::RolledBack => "rolled-back",
        }
    }
}

/// What happened to one step.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub name: String,
    pub action: Action,
    pub result: StepResult,
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<String>,
    /// `sha256:...`, `git:<commit>`, `path:...` or the requirement installed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The wheel came from the wheel cache: nothing was compiled.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_cache: bool,
    /// How it went, when that needs saying (a compile retried with fewer jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the compile cache did for this step's compiles (`--compile-cache`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile_cache: Option<crate::compile_cache::stats::Stats>,
}

/// Everything the executor needs besides the plan.
pub struct Context<'a> {
    pub set: &'a RecipeSet,
    pub machine: &'a MachineFacts,
    pub python: PathBuf,
    pub cache: PathBuf,
    pub logs: PathBuf,
    pub installer: Installer,
    /// Time limit for each import during verification.
    pub import_timeout: Duration,
    /// The facts the plan was made from (installed dists, for backups and constraints).
    pub facts: &'a PythonFacts,
    /// Use only what the caches hold: no download, no clone, no index.
    pub offline: bool,
    /// The wheel sha256 a lock names, by component: a wheel taken from the cache as it is
    /// must be that one (empty without a lock).
    pub locked_wheels: std::collections::BTreeMap<String, String>,
    /// `--stall` and `--limit`: a build's stall and overall time limits, over the recipe's.
    pub stall: Option<Duration>,
    pub limit: Option<Duration>,
    /// `--compile-cache`: sccache in front of every build's compilers.
    pub compile_cache: Option<compile::CompileCache>,
    /// `--keep-done`: a proven step stays when a later one fails (else the run is one
    /// transaction, [`txn`]).
    pub keep_done: bool,
    /// Build requirements installed once per set for the run's builds.
    pub overlays: overlay::Shared,
    /// `--memory-limit`: the memory the run's builds may hold together, at most.
    pub memory_limit: Option<u64>,
}

/// What a run did: an outcome per step reached (in plan order), the first failure, and any
/// other build that failed while it ran.
#[derive(Debug)]
pub struct RunReport {
    pub outcomes: Vec<Outcome>,
    pub failure: Option<BuildFailure>,
    pub more_failures: Vec<BuildFailure>,
    /// The environment as the last verification saw it (`None` when no step was verified).
    pub facts: Option<PythonFacts>,
    /// After a failure: what the transaction put back, for the run as a whole.
    pub undo: Option<txn::Undo>,
}

/// A name for this run: seconds since the epoch and the process id.
pub fn run_stamp() -> String {
    crate::store::stamp()
}
