//! Build: carries out a [`Plan`]. For each step that changes something: get the source, build a
//! wheel (with build requirements in a private overlay, never in the environment), back up what
//! is installed, install the wheel, and prove it with a fresh probe of its imports (and its
//! smoke test) before any dependent starts. Builds whose dependencies are installed run side by
//! side within the CPU and memory budget ([`schedule`]); installs run one at a time. A failed
//! step leaves the environment as it was for that component and no new build starts.
//!
//! A verified wheel is kept in the wheel cache ([`wheels`]); a later build with the same inputs,
//! on this node or another sharing the cache, installs it instead of compiling.
//!
//! Progress goes through the [`Reporter`] trait; this module never prints. It deliberately
//! ignores choosing versions and deciding what needs building (that is the plan's job): it
//! carries out the steps it is given.

pub mod events;
pub mod install;
pub mod schedule;
pub mod source;
pub mod wheels;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::probe::python::{self, PythonFacts};
use crate::probe::{MachineFacts, normalize};
use crate::process::{Cmd, CommandFailed};
use crate::recipe::template::Vars;
use crate::recipe::{Recipe, RecipeSet, Source};
use crate::resolve::{Action, Plan, Step};
use install::{Backup, Installer};

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

/// Receives progress. Implemented by the terminal front end; core code only calls it.
pub trait Reporter {
    fn step_started(&self, step: &Step);
    fn phase(&self, step: &Step, phase: Phase, detail: &str);
    fn step_finished(&self, step: &Step, outcome: &Outcome);
}

/// What happened to one step.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub name: String,
    pub action: Action,
    /// `done`, `kept` or `failed`.
    pub result: &'static str,
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
}

/// What a step that changed something leaves behind.
struct StepDone {
    wheel: Option<PathBuf>,
    source: String,
    from_cache: bool,
    /// Something the user should know about how it went (a retry with fewer jobs).
    note: Option<String>,
    /// The verification probe's facts: the environment as it is after this step.
    facts: PythonFacts,
}

/// A step that failed, with what the user needs to see.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {phase} failed: {message}")]
pub struct BuildFailure {
    pub name: String,
    pub phase: &'static str,
    pub message: String,
    pub command: Option<Box<CommandFailed>>,
    /// How the environment was put back.
    pub restored: String,
    pub hint: Option<String>,
}

/// Everything the executor needs besides the plan.
pub struct Context<'a> {
    pub set: &'a RecipeSet,
    pub machine: &'a MachineFacts,
    pub python: PathBuf,
    pub cache: PathBuf,
    pub logs: PathBuf,
    pub installer: Installer,
    pub jobs: Option<usize>,
    /// Time limit for each import during verification.
    pub import_timeout: Duration,
    /// The facts the plan was made from (installed dists, for backups and constraints).
    pub facts: &'a PythonFacts,
    /// Use only what the caches hold: no download, no clone, no index.
    pub offline: bool,
}

/// What a run did: an outcome per step reached (in plan order), the first failure, and any
/// other build that failed while it ran.
#[derive(Debug)]
pub struct RunReport {
    pub outcomes: Vec<Outcome>,
    pub failure: Option<BuildFailure>,
    pub more_failures: Vec<BuildFailure>,
}

/// Runs every changing step of `plan`: builds start when what they depend on is installed and
/// while CPUs and memory last ([`schedule`]), side by side; each finished wheel is installed and
/// verified on this thread, one at a time. After a failure no new build starts; builds under way
/// finish, and those that succeed are installed (they depend on nothing that failed).
pub fn execute(plan: &Plan, cx: &Context, reporter: &(dyn Reporter + Sync)) -> RunReport {
    let steps = &plan.steps;
    let waits = schedule::waits(plan, cx.set);
    let mut outcomes: Vec<Option<Outcome>> = vec![None; steps.len()];
    let mut installed = vec![false; steps.len()];
    let mut started: Vec<Option<Instant>> = vec![None; steps.len()];
    let mut failures: Vec<BuildFailure> = Vec::new();
    // The environment as the last verification saw it (the plan's facts before any step).
    let mut latest: Option<PythonFacts> = None;
    let outcome = |step: &Step, since: Instant, result: &'static str, done: Option<&StepDone>| Outcome {
        name: step.name.clone(),
        action: step.action,
        result,
        seconds: since.elapsed().as_secs_f64(),
        wheel: done.and_then(|d| d.wheel.as_ref()).map(|w| w.display().to_string()),
        source: done.map(|d| d.source.clone()),
        from_cache: done.is_some_and(|d| d.from_cache),
        note: done.and_then(|d| d.note.clone()),
    };
    for (i, step) in steps.iter().enumerate().filter(|(_, s)| !s.action.changes()) {
        reporter.step_started(step);
        let o = outcome(step, Instant::now(), "kept", None);
        reporter.step_finished(step, &o);
        outcomes[i] = Some(o);
        installed[i] = true;
    }
    let mut budget = schedule::Budget::now(cx.machine);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut running = 0;
        loop {
            for (i, step) in steps.iter().enumerate() {
                if !failures.is_empty() || started[i].is_some() || installed[i] {
                    continue;
                }
                if !waits[i].iter().all(|&j| installed[j]) {
                    continue;
                }
                let per_job = cx.set.get(&step.name).and_then(|r| r.build.memory_per_job);
                let Some(claim) = budget.claim(per_job, cx.jobs, running) else {
                    continue;
                };
                reporter.step_started(step);
                started[i] = Some(Instant::now());
                running += 1;
                let known = latest.clone().unwrap_or_else(|| cx.facts.clone());
                let tx = tx.clone();
                scope.spawn(move || {
                    let prepared = prepare(step, plan, cx, &known, claim.jobs, reporter);
                    let _ = tx.send((i, claim, prepared));
                });
            }
            if running == 0 {
                break;
            }
            let Ok((i, claim, prepared)) = rx.recv() else { break };
            running -= 1;
            budget.release(claim);
            let step = &steps[i];
            let since = started[i].unwrap_or_else(Instant::now);
            match prepared.and_then(|p| commit(step, plan, cx, p, reporter)) {
                Ok(done) => {
                    let o = outcome(step, since, "done", Some(&done));
                    reporter.step_finished(step, &o);
                    outcomes[i] = Some(o);
                    installed[i] = true;
                    latest = Some(carry_torch_facts(latest.as_ref().unwrap_or(cx.facts), done.facts));
                }
                Err(f) => {
                    let o = outcome(step, since, "failed", None);
                    reporter.step_finished(step, &o);
                    outcomes[i] = Some(o);
                    failures.push(f);
                }
            }
        }
    });
    let mut failures = failures.into_iter();
    RunReport {
        outcomes: outcomes.into_iter().flatten().collect(),
        failure: failures.next(),
        more_failures: failures.collect(),
    }
}

fn fail(step: &Step, phase: Phase, message: impl Into<String>) -> BuildFailure {
    BuildFailure {
        name: step.name.clone(),
        phase: phase.as_str(),
        message: message.into(),
        command: None,
        restored: "nothing was installed; the environment is unchanged".into(),
        hint: None,
    }
}

fn cmd_fail(step: &Step, phase: Phase, e: CommandFailed) -> BuildFailure {
    let hint = hint_for(&e);
    BuildFailure {
        name: step.name.clone(),
        phase: phase.as_str(),
        message: format!("`{}` exited with {}", e.command, e.status),
        command: Some(Box::new(e)),
        restored: "nothing was installed; the environment is unchanged".into(),
        hint,
    }
}

/// SIGKILL, or a compiler driver reporting that its child was killed: what the OOM killer does.
fn killed_by_oom(e: &CommandFailed) -> bool {
    e.status.contains("signal 9") || e.tail.iter().any(|l| l.contains("Killed") || l.contains("signal 9"))
}

/// Known failures and what to do about them.
fn hint_for(e: &CommandFailed) -> Option<String> {
    let text = e.tail.join("\n");
    if killed_by_oom(e) {
        return Some("the compiler was killed, most likely by the OOM killer: retry with a smaller `--jobs`".into());
    }
    if text.contains("No module named 'torch'") {
        return Some("this build needs torch in the environment first: `kiln install torch`".into());
    }
    if text.contains("invalid command 'bdist_wheel'") {
        return Some("the environment lacks the `wheel` package needed by setuptools < 70.1".into());
    }
    if text.contains("nvcc: not found") || text.contains("nvcc not found") {
        return Some("nvcc is not on PATH: set CUDA_HOME to a CUDA toolkit".into());
    }
    None
}

/// A verification probe that did not import torch still describes the same torch when its
/// version did not change: keep the ABI facts an earlier probe saw.
fn carry_torch_facts(before: &PythonFacts, mut after: PythonFacts) -> PythonFacts {
    let version = |f: &PythonFacts| f.dists.get("torch").map(|d| d.version.clone());
    if after.torch.is_none() && version(before) == version(&after) {
        after.torch = before.torch.clone();
    }
    after
}

/// The fingerprint of each dependency the step links against (`abi = true`) in `facts`, and
/// whether all are known (torch counts as known only with the ABI facts of an import).
fn abi_fingerprints(
    r: &Recipe,
    step: &Step,
    cx: &Context,
    facts: &PythonFacts,
) -> (std::collections::BTreeMap<String, String>, bool) {
    let mut out = std::collections::BTreeMap::new();
    let mut complete = true;
    for d in r.depends_with(&step.features).filter(|d| d.abi) {
        let dep_dist = cx
            .set
            .get(&d.name)
            .and_then(|x| x.dist.clone())
            .unwrap_or_else(|| d.name.clone());
        match facts.fingerprint(&dep_dist) {
            Some(fp) => {
                complete &= normalize(&dep_dist) != "torch" || facts.torch.is_some();
                out.insert(d.name.clone(), fp);
            }
            None => complete = false,
        }
    }
    (out, complete)
}

/// A step's wheel, built (or found in the cache) and ready to install; for an index wheel, the
/// requirement to install.
struct Prepared {
    to_install: String,
    identity: String,
    wheel: Option<PathBuf>,
    index_url: Option<String>,
    cache_entry: Option<(wheels::WheelKey, serde_json::Value)>,
    from_cache: bool,
    note: Option<String>,
    work: PathBuf,
}

fn recipe_of<'a>(step: &Step, cx: &Context<'a>) -> Result<&'a Recipe, BuildFailure> {
    cx.set
        .get(&step.name)
        .ok_or_else(|| fail(step, Phase::Fetch, "no recipe"))
}

fn log_of(cx: &Context, step: &Step, phase: Phase) -> PathBuf {
    cx.logs.join(format!("{}.{}.log", step.name, phase.as_str()))
}

/// Fetches the source and builds the wheel with `jobs` compile jobs (or takes it from the wheel
/// cache). Touches nothing in the environment, so steps whose dependencies are installed can
/// prepare side by side.
fn prepare(
    step: &Step,
    plan: &Plan,
    cx: &Context,
    known: &PythonFacts,
    jobs: usize,
    reporter: &dyn Reporter,
) -> Result<Prepared, BuildFailure> {
    let r = recipe_of(step, cx)?;
    // The source of the version the plan chose (a recipe can describe several).
    let source = r
        .source_of(step.version.as_deref())
        .ok_or_else(|| fail(step, Phase::Fetch, "the recipe has no source"))?;
    let log = |phase: Phase| log_of(cx, step, phase);
    let work = cx.cache.join("work").join(format!("{}-{}", step.name, run_stamp()));
    if let Source::Wheel { requirement, index_url } = source {
        return Ok(Prepared {
            to_install: requirement.clone(),
            identity: format!("index:{requirement}"),
            wheel: None,
            index_url: index_url.clone(),
            cache_entry: None,
            from_cache: false,
            note: None,
            work,
        });
    }
    reporter.phase(step, Phase::Fetch, &describe(source));
    let fetched = source::fetch(
        source,
        r.dir.as_deref(),
        &work,
        &cx.cache,
        cx.offline,
        &log(Phase::Fetch),
    )
    .map_err(|e| match e {
        source::SourceError::Command(c) => cmd_fail(step, Phase::Fetch, c),
        other => fail(step, Phase::Fetch, other.to_string()),
    })?;
    let cache_entry = cache_key(step, r, plan, cx, known, source, &fetched);
    let cached = cache_entry.as_ref().and_then(|(key, _)| wheels::lookup(&cx.cache, key));
    let (wheel, from_cache, note) = match cached {
        Some(w) => {
            reporter.phase(step, Phase::Wheel, "from the wheel cache");
            (w, true, None)
        }
        None => {
            let (w, n) = build_wheel(step, r, plan, cx, &fetched.dir, &work, jobs, reporter, &log)?;
            (w, false, n)
        }
    };
    Ok(Prepared {
        to_install: wheel.display().to_string(),
        identity: fetched.identity,
        wheel: Some(wheel),
        index_url: None,
        cache_entry,
        from_cache,
        note,
        work,
    })
}

/// Installs a prepared step and proves it; on any failure puts the environment back. Runs one
/// at a time: installs never overlap.
fn commit(
    step: &Step,
    plan: &Plan,
    cx: &Context,
    p: Prepared,
    reporter: &dyn Reporter,
) -> Result<StepDone, BuildFailure> {
    let r = recipe_of(step, cx)?;
    let log = |phase: Phase| log_of(cx, step, phase);
    let dist_name = r.dist.clone().unwrap_or_else(|| r.name.clone());
    let installed = cx.facts.dists.get(&normalize(&dist_name));
    let work = &p.work;
    // Back up what is there, install, verify; on any failure put it back.
    let backup =
        Backup::take(installed, &work.join("backup")).map_err(|e| fail(step, Phase::Install, e.to_string()))?;
    reporter.phase(
        step,
        Phase::Install,
        &format!("{} ({})", dist_name, cx.installer.name()),
    );
    let constraints = if r.install_deps {
        Some(write_constraints(cx, &dist_name, work).map_err(|e| fail(step, Phase::Install, e))?)
    } else {
        None
    };
    let installed_result = cx
        .installer
        .install(
            &cx.python,
            std::slice::from_ref(&p.to_install),
            r.install_deps,
            constraints.as_deref(),
            p.index_url.as_deref(),
        )
        .run_logged(&log(Phase::Install));
    let verified = match installed_result {
        Err(e) => Err(cmd_fail(step, Phase::Install, e)),
        Ok(()) => {
            reporter.phase(step, Phase::Verify, &r.imports.join(", "));
            verify(step, r, plan, cx).and_then(|facts| {
                record(step, r, plan, cx, &facts, &dist_name, &p.identity, p.wheel.as_deref()).map(|()| facts)
            })
        }
    };
    let facts = match verified {
        Ok(facts) => facts,
        Err(mut f) => {
            reporter.phase(step, Phase::Restore, "putting the environment back");
            f.restored = restore(cx, &dist_name, backup.as_ref(), &log(Phase::Restore));
            return Err(f);
        }
    };
    let _ = std::fs::remove_dir_all(work.join("backup"));
    // Only a verified wheel is kept. A cache that cannot be written costs a later rebuild, not
    // this install: say so in the wheel log.
    let mut wheel = p.wheel.clone();
    if let (false, Some((key, inputs)), Some(w)) = (p.from_cache, &p.cache_entry, &p.wheel) {
        match wheels::store(&cx.cache, key, inputs, w) {
            Ok(kept) => wheel = Some(kept),
            Err(e) => {
                let note = format!("\n# not kept in the wheel cache: {e}\n");
                let _ = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(log(Phase::Wheel))
                    .and_then(|mut f| std::io::Write::write_all(&mut f, note.as_bytes()));
            }
        }
    }
    // The build tree (sources, objects, the build-requirements overlay) is most of the disk a
    // build takes: gone once the component is proven. A failed step keeps it for debugging.
    let _ = std::fs::remove_dir_all(work.join("src"));
    let _ = std::fs::remove_dir_all(work.join("build-requires"));
    if wheel.as_ref().is_none_or(|w| !w.starts_with(work)) {
        let _ = std::fs::remove_dir_all(work);
    }
    Ok(StepDone {
        wheel,
        source: p.identity,
        from_cache: p.from_cache,
        note: p.note,
        facts,
    })
}

/// The wheel cache key of this build, with its inputs; `None` when something that decides the
/// binary is unknown (an ABI dependency's fingerprint, a local tree that cannot be read).
fn cache_key(
    step: &Step,
    r: &Recipe,
    plan: &Plan,
    cx: &Context,
    known: &PythonFacts,
    source: &Source,
    fetched: &source::Fetched,
) -> Option<(wheels::WheelKey, serde_json::Value)> {
    let (abi, complete) = abi_fingerprints(r, step, cx, known);
    if !complete {
        return None;
    }
    let identity = match source {
        Source::Path { .. } => format!("tree:{}", wheels::tree_hash(&fetched.dir).ok()?),
        _ => fetched.identity.clone(),
    };
    let m = &known.python.markers;
    let inputs = wheels::KeyInputs {
        component: &r.name,
        version: step.version.as_deref().unwrap_or_default(),
        features: &step.features,
        source: &identity,
        build: serde_json::to_value(&r.build).ok()?,
        archs: plan.archs.clone(),
        cuda: cx.machine.cuda_toolkit.as_ref().map(|t| t.version.to_string()),
        host_compiler: cx.machine.host_compiler.as_ref().map(|c| c.value.as_str()),
        python: &known.python.version,
        implementation: &known.python.implementation,
        platform: m
            .get("sys_platform")
            .zip(m.get("platform_machine"))
            .map(|(s, a)| format!("{s} {a}")),
        abi: &abi,
    };
    Some((wheels::WheelKey::of(&inputs), serde_json::to_value(&inputs).ok()?))
}

#[allow(clippy::too_many_arguments)]
fn build_wheel(
    step: &Step,
    r: &Recipe,
    plan: &Plan,
    cx: &Context,
    src: &Path,
    work: &Path,
    jobs: usize,
    reporter: &dyn Reporter,
    log: &dyn Fn(Phase) -> PathBuf,
) -> Result<(PathBuf, Option<String>), BuildFailure> {
    let wheel_dir = work.join("wheel");
    std::fs::create_dir_all(&wheel_dir).map_err(|e| {
        fail(
            step,
            Phase::Wheel,
            format!("cannot create {}: {e}", wheel_dir.display()),
        )
    })?;
    let mut vars = Vars {
        python: cx.python.display().to_string(),
        src: src.display().to_string(),
        wheel_dir: wheel_dir.display().to_string(),
        jobs,
        version: step
            .version
            .clone()
            .unwrap_or_else(|| r.version.as_ref().map(|v| v.to_string()).unwrap_or_default()),
        cuda_home: cx
            .machine
            .cuda_toolkit
            .as_ref()
            .and_then(|t| t.home.as_ref())
            .map(|h| h.display().to_string()),
        cuda_version: cx.machine.cuda_toolkit.as_ref().map(|t| t.version.clone()),
        archs: plan.archs.clone(),
    };
    // The recipe's env depends on `{jobs}`, which a retry lowers: rendered again each time.
    let render_env = |vars: &Vars| -> Result<Vec<(String, String)>, BuildFailure> {
        r.build
            .env
            .iter()
            .map(|(k, t)| {
                t.render(vars)
                    .map(|v| (k.clone(), v))
                    .map_err(|e| fail(step, Phase::Wheel, format!("cannot set {k}: {e}")))
            })
            .collect()
    };
    let mut env = render_env(&vars)?;
    let mut overlay_env: Vec<(String, String)> = Vec::new();
    if !r.build.requires.is_empty() {
        reporter.phase(step, Phase::BuildRequires, &r.build.requires.join(" "));
        let overlay = work.join("build-requires");
        cx.installer
            .install_target(&cx.python, &r.build.requires, &overlay)
            .run_logged(&log(Phase::BuildRequires))
            .map_err(|e| cmd_fail(step, Phase::BuildRequires, e))?;
        let path = std::env::var("PATH").unwrap_or_default();
        overlay_env.push(("PYTHONPATH".into(), overlay.display().to_string()));
        overlay_env.push(("PATH".into(), format!("{}:{path}", overlay.join("bin").display())));
    }
    env.extend(overlay_env.iter().cloned());
    if let Some(manifest) = &r.build.cargo_manifest {
        reporter.phase(step, Phase::Prepare, &format!("cargo metadata {manifest}"));
        let meta = cargo_metadata::MetadataCommand::new()
            .manifest_path(src.join(manifest))
            .no_deps()
            .exec()
            .map_err(|e| {
                fail(
                    step,
                    Phase::Prepare,
                    format!("cannot read the Rust crate at {manifest}: {e}"),
                )
            })?;
        let names: Vec<String> = meta
            .packages
            .iter()
            .map(|p| format!("{} {}", p.name, p.version))
            .collect();
        let _ = std::fs::write(log(Phase::Prepare).with_extension("cargo.txt"), names.join("\n"));
    }
    let with_env = |mut c: Cmd, env: &[(String, String)]| {
        for (k, v) in env {
            c = c.env(k.clone(), v.clone());
        }
        c.cwd(src)
    };
    for cmd in &r.build.prepare {
        let args: Vec<String> = cmd
            .iter()
            .map(|t| t.render(&vars))
            .collect::<Result<_, _>>()
            .map_err(|e| fail(step, Phase::Prepare, e.to_string()))?;
        reporter.phase(step, Phase::Prepare, &args.join(" "));
        with_env(Cmd::new(args[0].clone()).args(args[1..].iter().cloned()), &env)
            .run_logged(&log(Phase::Prepare))
            .map_err(|e| cmd_fail(step, Phase::Prepare, e))?;
    }
    // A compile killed by the OOM killer is retried with half the jobs, down to one.
    let mut killed = 0;
    loop {
        let args: Vec<String> = match &r.build.wheel {
            Some(ts) => ts
                .iter()
                .map(|t| t.render(&vars))
                .collect::<Result<_, _>>()
                .map_err(|e| fail(step, Phase::Wheel, e.to_string()))?,
            None => vec![
                vars.python.clone(),
                "-m".into(),
                "pip".into(),
                "wheel".into(),
                "--no-deps".into(),
                "--no-build-isolation".into(),
                "--no-input".into(),
                "-w".into(),
                vars.wheel_dir.clone(),
                vars.src.clone(),
            ],
        };
        let jobs = vars.jobs;
        reporter.phase(
            step,
            Phase::Wheel,
            &format!("{} job{}", jobs, if jobs == 1 { "" } else { "s" }),
        );
        match with_env(Cmd::new(args[0].clone()).args(args[1..].iter().cloned()), &env).run_logged(&log(Phase::Wheel)) {
            Ok(()) => break,
            Err(e) if jobs > 1 && killed_by_oom(&e) => {
                killed += 1;
                vars.jobs = (jobs / 2).max(1);
                reporter.phase(
                    step,
                    Phase::Wheel,
                    &format!(
                        "the compiler was killed (most likely out of memory); retrying with {} job{}",
                        vars.jobs,
                        if vars.jobs == 1 { "" } else { "s" }
                    ),
                );
                let _ = std::fs::remove_dir_all(&wheel_dir);
                let _ = std::fs::create_dir_all(&wheel_dir);
                env = render_env(&vars)?;
                env.extend(overlay_env.iter().cloned());
            }
            Err(e) => return Err(cmd_fail(step, Phase::Wheel, e)),
        }
    }
    let note = (killed > 0).then(|| {
        format!(
            "the compiler was killed {killed} time{} (most likely by the OOM killer); built with {} job{}",
            if killed == 1 { "" } else { "s" },
            vars.jobs,
            if vars.jobs == 1 { "" } else { "s" }
        )
    });
    let wheels: Vec<PathBuf> = std::fs::read_dir(&wheel_dir)
        .map_err(|e| fail(step, Phase::Wheel, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok((one.clone(), note)),
        [] => Err(fail(
            step,
            Phase::Wheel,
            format!(
                "the build command succeeded but wrote no wheel to {}",
                wheel_dir.display()
            ),
        )),
        many => Err(fail(
            step,
            Phase::Wheel,
            format!("the build wrote {} wheels; expected one", many.len()),
        )),
    }
}

/// Writes `<dist-info>/kiln.json`: what was built, from what, for which archs and toolkit, and
/// the fingerprint of every dependency it links against (`abi = true`), so that a later change
/// of that dependency makes it `stale`.
#[allow(clippy::too_many_arguments)]
fn record(
    step: &Step,
    r: &Recipe,
    plan: &Plan,
    cx: &Context,
    facts: &PythonFacts,
    dist: &str,
    source: &str,
    wheel: Option<&Path>,
) -> Result<(), BuildFailure> {
    let installed = facts
        .dists
        .get(&normalize(dist))
        .ok_or_else(|| fail(step, Phase::Verify, format!("{dist} is not listed after installing it")))?;
    let Some(info) = &installed.dist_info else {
        return Ok(());
    };
    let (built_against, _) = abi_fingerprints(r, step, cx, facts);
    let rec = python::BuildRecord {
        component: r.name.clone(),
        version: installed.version.clone(),
        source: source.to_string(),
        wheel_sha256: wheel.and_then(|w| source::sha256_file(w).ok()),
        archs: plan.archs.clone(),
        cuda: cx.machine.cuda_toolkit.as_ref().map(|t| t.version.to_string()),
        built_against,
        features: step.features.clone(),
    };
    let text = serde_json::to_string_pretty(&rec).map_err(|e| fail(step, Phase::Verify, e.to_string()))?;
    let io = |e: std::io::Error| fail(step, Phase::Verify, format!("cannot write kiln.json into {info}: {e}"));
    std::fs::write(Path::new(info).join("kiln.json"), text).map_err(io)?;
    // List it in RECORD, so that uninstalling the distribution removes it too.
    let record = Path::new(info).join("RECORD");
    let listed = std::fs::read_to_string(&record).map_err(io)?;
    let dir = Path::new(info)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let line = format!("{dir}/kiln.json,,");
    if !listed.lines().any(|l| l == line) {
        let sep = if listed.ends_with('\n') || listed.is_empty() {
            ""
        } else {
            "\n"
        };
        std::fs::write(&record, format!("{listed}{sep}{line}\n")).map_err(io)?;
    }
    Ok(())
}

/// Proves the component in a fresh interpreter: every import its recipe names must run.
fn verify(step: &Step, r: &Recipe, plan: &Plan, cx: &Context) -> Result<PythonFacts, BuildFailure> {
    let mut imports = r.imports.clone();
    // Import what it links against first (torch above all), so the probe records their ABI facts.
    for d in r.depends_with(&step.features).filter(|d| d.abi) {
        if let Some(first) = cx.set.get(&d.name).and_then(|x| x.imports.first())
            && !imports.contains(first)
        {
            imports.insert(0, first.clone());
        }
    }
    for f in &step.features {
        if let Some(feat) = r.features.get(f) {
            imports.extend(feat.imports.iter().cloned());
        }
    }
    let facts =
        python::probe(&cx.python, &imports, cx.import_timeout).map_err(|e| fail(step, Phase::Verify, e.to_string()))?;
    let failed: Vec<String> = imports
        .iter()
        .filter_map(|m| {
            let res = facts.imports.get(m)?;
            (!res.ok).then(|| format!("import {m} failed: {}", res.error.as_deref().unwrap_or("?")))
        })
        .collect();
    if !failed.is_empty() {
        return Err(fail(step, Phase::Verify, failed.join("; ")));
    }
    // Where a GPU of the target arch is here, the kernels must also run.
    if !crate::probe::smoke::runnable_archs(&cx.machine.gpu_archs(), &plan.archs).is_empty()
        && let Some(smoke) = &r.smoke
    {
        let script = crate::probe::smoke::Script {
            component: &r.name,
            path: &smoke.path,
            text: &smoke.text,
        };
        let s = crate::probe::smoke::run(&cx.python, &script, &cx.cache.join("smoke"), cx.import_timeout);
        if !s.ok {
            return Err(fail(
                step,
                Phase::Verify,
                format!("smoke test failed: {}", s.error.unwrap_or_default()),
            ));
        }
    }
    Ok(facts)
}

/// Uninstalls what the failed step installed and restores the backup; says what was done.
fn restore(cx: &Context, dist: &str, backup: Option<&Backup>, log: &Path) -> String {
    let _ = cx.installer.uninstall(&cx.python, dist).run_logged(log);
    match backup {
        None => format!("{dist} was removed again; it was not installed before"),
        Some(b) => match b.restore() {
            Ok(()) => format!("the previous {dist} was restored ({} files)", b.len()),
            Err(e) => format!("RESTORE FAILED: {e}; see {}", log.display()),
        },
    }
}

/// Pins every installed distribution kiln manages, so that installing with dependencies can
/// never replace one of them (torch above all) behind the user's back.
fn write_constraints(cx: &Context, except: &str, work: &Path) -> Result<PathBuf, String> {
    let mut lines = Vec::new();
    for r in cx.set.recipes.values() {
        let Some(d) = &r.dist else { continue };
        if normalize(d) == normalize(except) {
            continue;
        }
        if let Some(inst) = cx.facts.dists.get(&normalize(d)) {
            lines.push(format!("{}=={}", inst.name, inst.version));
        }
    }
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let path = work.join("constraints.txt");
    std::fs::write(&path, lines.join("\n") + "\n").map_err(|e| e.to_string())?;
    Ok(path)
}

fn describe(s: &Source) -> String {
    match s {
        Source::Sdist { url, .. } => url.rsplit('/').next().unwrap_or(url).to_string(),
        Source::Git { url, rev, .. } => format!("{url} @ {rev}"),
        Source::Path { path } => path.display().to_string(),
        Source::Wheel { requirement, .. } => requirement.clone(),
    }
}

/// A name for this run: seconds since the epoch and the process id.
pub fn run_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{secs}-{}", std::process::id())
}
