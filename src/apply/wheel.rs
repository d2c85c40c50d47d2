//! Building one wheel exactly as the plan's [`BuildSpec`] says: its build requirements into a
//! private overlay, `cargo metadata` for a Rust crate, each `prepare` command, then the wheel
//! command, all in the source tree with the spec's environment. The only values filled in here
//! are the run's: the source, wheel and overlay directories, kiln's own `PATH`, kiln's PEP 517
//! front end (`pep517.py`, written beside the source: the default wheel command calls the
//! backend's `build_wheel` once), and the jobs, which start as planned and are halved (down to
//! one) after a compile killed for memory; the note that comes back says so.
//!
//! While the wheel command runs, its log is read for compile progress ([`super::progress`]) and
//! its process group's memory is sampled; the peak of a command that ran to the end, with its
//! jobs, goes to the reporter and into the cache as the next plan's estimate
//! ([`super::memory`]).
//!
//! It deliberately renders no recipe template (the plan did) and decides no job count of its
//! own beyond that retry.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::failure::{BuildFailure, StepError, retry_jobs};
use super::step::log_of;
use super::{Context, Phase, Reporter};
use crate::process::{Cmd, CommandFailed, Exit, Usage};
use crate::resolve::Step;
use crate::resolve::spec::{Arg, BuildSpec, Piece, RunValues};

/// `cargo metadata --no-deps` reads manifests and nothing else: minutes mean it is stuck.
const CARGO_METADATA_LIMIT: Duration = Duration::from_secs(300);

/// kiln's PEP 517 front end, written beside each build's source as [`FRONT_END`].
const PEP517: &str = include_str!("pep517.py");
const FRONT_END: &str = "kiln_build_wheel.py";

/// A built wheel, the note on how it went, and the compile cache's record.
pub(super) type Built = (PathBuf, Option<String>, Option<crate::compile_cache::stats::Stats>);

/// One wheel build: the step, its spec, and where it happens.
pub(super) struct WheelJob<'a> {
    pub step: &'a Step,
    pub spec: &'a BuildSpec,
    pub cx: &'a Context<'a>,
    pub src: &'a Path,
    pub work: &'a Path,
    pub reporter: &'a dyn Reporter,
    /// When the build began: its overall time limit counts from here.
    pub started: Instant,
    /// Where each declared build input was fetched, by name.
    pub inputs: std::collections::BTreeMap<String, String>,
}

impl WheelJob<'_> {
    /// Runs the spec; returns the wheel, a note when the compile had to be retried, and what
    /// the compile cache did (`--compile-cache`).
    pub fn build(&self) -> Result<Built, BuildFailure> {
        let cache = self.cx.compile_cache.as_ref().zip(self.spec.compile_cache.as_ref());
        let Some((cc, (_, wiring))) = cache else {
            let (wheel, note) = self.build_with(None)?;
            return Ok((wheel, note, None));
        };
        let log = self.log(Phase::Wheel).with_extension("sccache.log");
        let starting = format!("compile cache {}: starting sccache", cc.shown());
        self.reporter.phase(self.step, Phase::Wheel, &starting);
        let sc = cc.begin(self.step, wiring.nvcc.as_deref(), &log, self.reporter);
        let built = self.build_with(sc.run.clone());
        let stats = cc.finish(self.step, sc, self.reporter);
        built.map(|(wheel, note)| (wheel, note, stats))
    }

    fn build_with(&self, compile_cache: Option<(String, bool)>) -> Result<(PathBuf, Option<String>), BuildFailure> {
        let wheel_dir = self.work.join("wheel");
        std::fs::create_dir_all(&wheel_dir).map_err(|e| {
            let context = format!("cannot create {}", wheel_dir.display());
            self.fail(Phase::Wheel, StepError::io(context)(e))
        })?;
        let front_end = self.work.join(FRONT_END);
        std::fs::write(&front_end, PEP517).map_err(|e| {
            let context = format!("cannot write {}", front_end.display());
            self.fail(Phase::Wheel, StepError::io(context)(e))
        })?;
        let mut values = run_values(self.spec, self.src, &wheel_dir, &self.work.join("build-requires"));
        values.front_end = front_end.display().to_string();
        values.compile_cache = compile_cache;
        values.inputs = self.inputs.clone();
        self.build_requires(&mut values)?;
        if let Some(manifest) = &self.spec.cargo_manifest {
            self.cargo_metadata(manifest)?;
        }
        for command in &self.spec.prepare {
            let argv = BuildSpec::argv(command, &values);
            self.reporter.phase(self.step, Phase::Prepare, &argv.join(" "));
            self.command(Phase::Prepare, argv, &values)?
                .run_logged(&self.log(Phase::Prepare))
                .map_err(|e| self.command_failed(Phase::Prepare, e))?;
        }
        let killed = self.wheel(&mut values, &wheel_dir)?;
        let note = (killed > 0).then(|| {
            format!(
                "the compiler was killed {killed} time{} (most likely by the OOM killer); built with {}",
                plural(killed),
                jobs_text(values.jobs)
            )
        });
        let wheel = one_wheel(&wheel_dir).map_err(|e| self.fail(Phase::Wheel, e))?;
        Ok((wheel, note))
    }

    /// Runs the wheel command; a compile killed for memory is run again with half the jobs,
    /// down to one. Returns how many times it was killed.
    fn wheel(&self, values: &mut RunValues, wheel_dir: &Path) -> Result<usize, BuildFailure> {
        let mut killed = 0;
        loop {
            let gate = self.work.join("gate");
            values.gate = super::gate::open(&gate, &self.cx.cache, self.spec, values.jobs, self.src);
            let argv = BuildSpec::argv(&self.spec.wheel, values);
            self.reporter.phase(self.step, Phase::Wheel, &jobs_text(values.jobs));
            let usage = Arc::new(Usage::default());
            let command = self.command(Phase::Wheel, argv, values)?.measure(usage.clone());
            let ran = self.watched(&command, &jobs_text(values.jobs));
            // What each unit took, whether the build got to the end or not, kept for the next
            // plan and beside the step's logs.
            let (measured, version) = (gate.join(super::gate::MEASURED), self.step.version.as_deref());
            let key = &self.spec.memory_key;
            let _ = super::unit_memory::keep(&self.cx.cache, key, version, &measured, ran.is_ok());
            let _ = std::fs::copy(&measured, self.log(Phase::Wheel).with_extension("units.jsonl"));
            let Err(e) = ran else {
                self.measured(usage.peak(), values.jobs);
                return Ok(killed);
            };
            let Some(fewer) = retry_jobs(values.jobs, &e) else {
                return Err(self.command_failed(Phase::Wheel, e));
            };
            killed += 1;
            values.jobs = fewer;
            let retry = format!(
                "the compiler was killed (most likely out of memory); retrying with {}",
                jobs_text(fewer)
            );
            self.reporter.phase(self.step, Phase::Wheel, &retry);
            let _ = std::fs::remove_dir_all(wheel_dir);
            let _ = std::fs::create_dir_all(wheel_dir);
        }
    }

    /// Runs the wheel command on another thread while this one reads its log for progress.
    fn watched(&self, command: &Cmd, detail: &str) -> Result<(), CommandFailed> {
        let log = self.log(Phase::Wheel);
        let (tx, rx) = mpsc::channel::<()>();
        let step_scope = crate::process::group::current();
        std::thread::scope(|scope| {
            let run = scope.spawn(|| {
                let _in = crate::process::group::within(step_scope);
                let ran = command.run_logged(&log);
                let _ = tx.send(());
                ran
            });
            let ended = |d| !matches!(rx.recv_timeout(d), Err(mpsc::RecvTimeoutError::Timeout));
            super::progress::watch(&log, self.step, detail, self.reporter, ended);
            run.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// Tells the reporter what the wheel command took, and keeps it as this machine's estimate
    /// for the component (a sample of nothing is not a measurement).
    fn measured(&self, peak: u64, jobs: usize) {
        if peak == 0 {
            return;
        }
        self.reporter.measured(self.step, peak, jobs);
        let m = super::memory::Measured::new(&self.step.name, self.step.version.as_deref(), peak, jobs);
        let _ = super::memory::record(&self.cx.cache, &m);
    }

    /// Installs the build requirements into the overlay the spec's environment points at: the
    /// run's shared one for this set where another build installed it ([`super::overlay`]),
    /// unless the build's commands name `{overlay}`.
    fn build_requires(&self, values: &mut RunValues) -> Result<(), BuildFailure> {
        if self.spec.requires.is_empty() {
            return Ok(());
        }
        if let Some(why) = self.cx.installer.fallback() {
            self.reporter.warning(self.step, why);
        }
        let how = self.cx.installer.name();
        let detail = format!("{} ({how})", self.spec.requires.join(" "));
        let install = |dir: &Path| {
            self.reporter.phase(self.step, Phase::BuildRequires, &detail);
            let c = self
                .cx
                .installer
                .install_target(&self.cx.python, &self.spec.requires, dir);
            self.bounded(c)
                .run_logged(&self.log(Phase::BuildRequires))
                .map_err(|e| self.command_failed(Phase::BuildRequires, e))
        };
        if super::overlay::named_by(self.spec) {
            return install(Path::new(&values.overlay));
        }
        let identity = format!("{how} {}", self.cx.python.display());
        match self
            .cx
            .overlays
            .get(&self.spec.requires, &identity, &self.step.name, install)?
        {
            super::overlay::Overlay::Made(dir) => values.overlay = dir.display().to_string(),
            super::overlay::Overlay::Installed { dir, by } => {
                let shared = format!("{} (installed by {by} in this run)", self.spec.requires.join(" "));
                self.reporter.phase(self.step, Phase::BuildRequires, &shared);
                values.overlay = dir.display().to_string();
            }
        }
        Ok(())
    }

    /// Reads the Rust crate at `manifest` with `cargo metadata`, logged and within a time limit;
    /// its packages go beside the prepare log.
    fn cargo_metadata(&self, manifest: &str) -> Result<(), BuildFailure> {
        self.reporter
            .phase(self.step, Phase::Prepare, &format!("cargo metadata {manifest}"));
        let mut metadata = cargo_metadata::MetadataCommand::new();
        metadata.manifest_path(self.src.join(manifest)).no_deps();
        let log = self.log(Phase::Prepare);
        let unreadable = |detail: String| StepError::CargoMetadata {
            manifest: manifest.to_string(),
            detail,
        };
        let json = Cmd::from_std(&metadata.cargo_command())
            .timeout(CARGO_METADATA_LIMIT)
            .output_logged(&log)
            .map_err(|e| {
                let detail = e.to_string();
                BuildFailure {
                    message: Box::new(unreadable(detail)),
                    ..self.command_failed(Phase::Prepare, e)
                }
            })?;
        let meta = cargo_metadata::MetadataCommand::parse(json)
            .map_err(|e| self.fail(Phase::Prepare, unreadable(e.to_string())))?;
        let names: Vec<String> = meta
            .packages
            .iter()
            .map(|p| format!("{} {}", p.name, p.version))
            .collect();
        let _ = std::fs::write(log.with_extension("cargo.txt"), names.join("\n"));
        Ok(())
    }

    /// `argv` as a command in the source tree with the spec's environment.
    fn command(&self, phase: Phase, argv: Vec<String>, values: &RunValues) -> Result<Cmd, BuildFailure> {
        let argv = if self.spec.deny_network {
            super::sandbox::wrap(argv)
        } else {
            argv
        };
        let Some((program, args)) = argv.split_first() else {
            return Err(self.fail(phase, StepError::EmptyCommand));
        };
        let mut c = Cmd::new(program.clone()).args(args.iter().cloned()).cwd(self.src);
        for (k, v) in self.spec.env_with(values) {
            c = c.env(k, v);
        }
        Ok(self.bounded(c))
    }

    /// The stall and overall limits (the command line's, else the recipe's; see [`stall_of`]).
    fn limits(&self) -> (Option<Duration>, Option<Duration>) {
        (
            stall_of(self.cx.stall, self.spec.stall),
            self.cx.limit.or(self.spec.limit),
        )
    }

    /// `c` within the build's limits: its stall limit, and what is left of the overall one.
    fn bounded(&self, c: Cmd) -> Cmd {
        let (stall, limit) = self.limits();
        let c = match stall {
            Some(s) => c.stall(s),
            None => c,
        };
        match limit {
            Some(l) => c.timeout(l.saturating_sub(self.started.elapsed()).max(Duration::from_millis(1))),
            None => c,
        }
    }

    fn log(&self, phase: Phase) -> PathBuf {
        log_of(self.cx, self.step, phase)
    }

    fn fail(&self, phase: Phase, e: StepError) -> BuildFailure {
        BuildFailure::new(&self.step.name, phase, e)
    }

    fn command_failed(&self, phase: Phase, mut e: CommandFailed) -> BuildFailure {
        // What ran out is the whole build's limit, not this command's share of it.
        if let (Exit::TimedOut(_), (_, Some(l))) = (&e.status, self.limits()) {
            e.status = Exit::OverLimit(l);
        }
        BuildFailure::of_command(&self.step.name, phase, e)
    }
}

/// The run's values: these directories, kiln's `PATH`, and the planned jobs.
fn run_values(spec: &BuildSpec, src: &Path, wheel_dir: &Path, overlay: &Path) -> RunValues {
    let inherited = spec
        .env
        .values()
        .flat_map(|a: &Arg| &a.0)
        .filter_map(|p| match p {
            Piece::Inherited(name) => Some((name.clone(), std::env::var(name).unwrap_or_default())),
            _ => None,
        })
        .collect();
    RunValues {
        src: src.display().to_string(),
        wheel_dir: wheel_dir.display().to_string(),
        overlay: overlay.display().to_string(),
        jobs: spec.jobs,
        inherited,
        front_end: String::new(),
        compile_cache: None,
        inputs: Default::default(),
        gate: None,
    }
}

/// The one wheel a build wrote into `dir`.
fn one_wheel(dir: &Path) -> Result<PathBuf, StepError> {
    let context = format!("cannot read {}", dir.display());
    let wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(StepError::io(context))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(StepError::NoWheel { dir: dir.to_path_buf() }),
        many => Err(StepError::ManyWheels(many.len())),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `1 job`, `4 jobs`.
fn jobs_text(jobs: usize) -> String {
    format!("{jobs} job{}", plural(jobs))
}

/// A build command that writes nothing and uses no CPU time for this long is killed unless the
/// command line or the recipe says otherwise: a hung build (a lock waited on, a prompt
/// nobody answers) ends instead of holding the environment's lock for ever. A compile that
/// runs long uses CPU time and is never taken for stalled.
pub const DEFAULT_STALL: Duration = Duration::from_secs(30 * 60);

/// The stall limit: `--stall` (zero: `none`, no limit), else the recipe's `[build] stall`,
/// else [`DEFAULT_STALL`].
pub fn stall_of(cli: Option<Duration>, recipe: Option<Duration>) -> Option<Duration> {
    match cli.or(recipe) {
        Some(d) if d.is_zero() => None,
        Some(d) => Some(d),
        None => Some(DEFAULT_STALL),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_build_stalls_at_the_command_lines_limit_else_the_recipes_else_thirty_minutes() {
        use super::{DEFAULT_STALL, stall_of};
        use std::time::Duration;
        let m = |n: u64| Some(Duration::from_secs(n * 60));
        assert_eq!(stall_of(None, None), Some(DEFAULT_STALL));
        assert_eq!(DEFAULT_STALL, Duration::from_secs(1800));
        assert_eq!(stall_of(None, m(20)), m(20));
        assert_eq!(stall_of(m(5), m(20)), m(5));
        assert_eq!(stall_of(Some(Duration::ZERO), m(20)), None, "`--stall none` lifts it");
    }

    use super::*;
    use crate::recipe::Build;
    use crate::recipe::template::{Template, Vars};

    #[test]
    fn the_run_fills_in_its_directories_and_kilns_path_only() {
        let build = Build {
            requires: vec!["setuptools".into()],
            env: [("MAX_JOBS".to_string(), Template::parse("{jobs}").unwrap())].into(),
            ..Build::default()
        };
        let vars = Vars {
            python: "/v/bin/python".into(),
            jobs: 4,
            ..Vars::default()
        };
        let spec = BuildSpec::new(&build, &vars).unwrap();
        let v = run_values(&spec, Path::new("/w/src"), Path::new("/w/wheel"), Path::new("/w/req"));
        assert_eq!(
            (v.src.as_str(), v.wheel_dir.as_str(), v.jobs),
            ("/w/src", "/w/wheel", 4)
        );
        assert_eq!(v.inherited.keys().collect::<Vec<_>>(), ["PATH"]);
        let env = spec.env_with(&v);
        assert_eq!(env["PYTHONPATH"], "/w/req");
        assert_eq!(
            env["PATH"],
            format!("/w/req/bin:{}", std::env::var("PATH").unwrap_or_default())
        );
        assert_eq!(env["MAX_JOBS"], "4");
    }

    #[test]
    fn exactly_one_wheel_is_expected() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(one_wheel(dir.path()), Err(StepError::NoWheel { .. })));
        std::fs::write(dir.path().join("build.log"), "").unwrap();
        std::fs::write(dir.path().join("a-1.0-py3-none-any.whl"), "").unwrap();
        assert_eq!(
            one_wheel(dir.path()).unwrap(),
            dir.path().join("a-1.0-py3-none-any.whl")
        );
        std::fs::write(dir.path().join("b-1.0-py3-none-any.whl"), "").unwrap();
        assert_eq!(
            one_wheel(dir.path()).unwrap_err().to_string(),
            "the build wrote 2 wheels; expected one"
        );
        assert!(one_wheel(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn the_front_end_calls_the_in_tree_backend_once_with_its_config_settings() {
        let dir = tempfile::tempdir().unwrap();
        let (src, out) = (dir.path().join("src"), dir.path().join("out"));
        std::fs::create_dir_all(src.join("be")).unwrap();
        std::fs::write(
            src.join("pyproject.toml"),
            "[build-system]\nrequires = []\nbuild-backend = \"hooks:api\"\nbackend-path = [\"be\"]\n",
        )
        .unwrap();
        std::fs::write(
            src.join("be/hooks.py"),
            "import json, os, sys\nclass api:\n    @staticmethod\n    def build_wheel(d, config_settings=None, metadata_directory=None):\n        \
             seen = {'cwd': os.getcwd(), 'settings': config_settings, 'script_dir_on_path': any(p.endswith('fe') for p in sys.path)}\n        \
             open(os.path.join(d, 'x-1-py3-none-any.whl'), 'w').write(json.dumps(seen))\n        return 'x-1-py3-none-any.whl'\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("fe")).unwrap();
        let script = dir.path().join("fe").join(FRONT_END);
        std::fs::write(&script, PEP517).unwrap();
        let ran = Cmd::new("python3")
            .arg(script.display().to_string())
            .args([out.display().to_string(), src.display().to_string()])
            .args(["-C", "a=1", "--config-settings=b=x", "-C", "b=y"])
            .capture(b"", Duration::from_secs(60))
            .unwrap();
        assert!(ran.success, "{}", ran.stderr);
        assert!(ran.stdout.contains("kiln: built ") && ran.stdout.contains("x-1-py3-none-any.whl"));
        let seen: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("x-1-py3-none-any.whl")).unwrap()).unwrap();
        assert_eq!(seen["cwd"], src.display().to_string());
        assert_eq!(seen["settings"], serde_json::json!({"a": "1", "b": ["x", "y"]}));
        assert_eq!(seen["script_dir_on_path"], false);
    }

    #[test]
    fn job_counts_read_as_words() {
        assert_eq!(jobs_text(1), "1 job");
        assert_eq!(jobs_text(4), "4 jobs");
    }
}
