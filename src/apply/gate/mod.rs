//! The memory gate: what kiln puts in front of every CUDA compile of a build, and its build
//! side ([`open`]: the config each attempt of a build gives its gates)
//! (`kiln gate -- [sccache] nvcc ARGS`, through torch's `PYTORCH_NVCC` and CMake's
//! `CMAKE_CUDA_COMPILER_LAUNCHER`; the wiring is [`crate::resolve::spec::BuildSpec::env_with`]).
//! Each compile is one translation unit, and units differ (measured on an H100 machine,
//! BENCHMARKS.md): flash-attn 2.8.3's hdim64 forward kernel took 3.6 GiB where its hdim32 one
//! took 3.3 GiB, and that unit compiled for four archs with `--threads 2` took 6.5 GiB, two
//! compilers at once where a narrowed one holds one. So the gate
//! - names the unit (its source file, relative to the build's source tree),
//! - waits until the unit's estimate fits beside the units compiling now, within the memory the
//!   build was given ([`slots`]); the estimate is what this unit took when it was last built on
//!   this machine ([`super::unit_memory`]), else the build's figure per job,
//! - runs the compiler, sampling the summed resident memory of it and everything it starts
//!   ([`crate::process::tree`]), and appends what the unit took to `units.jsonl` in the gate's
//!   directory, which the build keeps for the next plan.
//!
//! Outside a build (no `KILN_GATE`) it only runs the command; where its config or its table
//! cannot be read or written it says so in the build's log ([`Notice::Ungated`]) and runs the
//! command ungated; CMake's own checks (`CMakeFiles/`) it runs without gating or keeping them.
//! It deliberately measures nothing behind sccache (the compile runs in sccache's server, not
//! under the gate) and gates only what it is put in front of: host C++ compiles are not
//! counted. The compiler's exit status (or the signal that killed it) is the gate's own. It runs
//! the compiler itself rather than through [`crate::process::Cmd`], which gives each program a
//! process group and a log of its own: the compiler stays in the gate's group (ninja signals
//! that group), its output goes straight to ninja, and it dies with the gate.

pub mod slots;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The variable that names the gate's directory in a build's environment.
pub const VAR: &str = crate::resolve::spec::GATE_VAR;
/// The gate's config in that directory, written by the build before the compiles.
pub const CONFIG: &str = "gate.json";
/// What the units took, one JSON line per compile, appended by the gates.
pub const MEASURED: &str = "units.jsonl";

/// What the build tells its gates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// The memory the build's CUDA compiles may hold together; `None`: no limit, only measure.
    pub limit: Option<u64>,
    /// The estimate of a unit with no figure of its own.
    pub unmeasured: Option<u64>,
    /// The figures per unit measured on this machine.
    #[serde(default)]
    pub units: std::collections::BTreeMap<String, u64>,
    /// The source tree the units are named relative to.
    pub src: PathBuf,
}

/// What one compile took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitRun {
    pub unit: String,
    /// The peak of the summed resident memory of the compiler and what it started, in bytes.
    pub peak: u64,
    pub seconds: f64,
    pub ok: bool,
    /// When it started, in seconds since the epoch.
    #[serde(default)]
    pub start: f64,
}

/// The source file a compiler command compiles: the argument after `-c` when it is a source
/// file, else the last argument that names one; relative to `src` where it lies inside it.
pub fn unit_of(args: &[OsString], src: &Path) -> Option<String> {
    const SOURCES: &[&str] = &["cu", "cpp", "cc", "cxx", "c", "C"];
    let is_source = |a: &OsString| {
        Path::new(a)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SOURCES.contains(&e))
    };
    let after_c = args
        .windows(2)
        .find(|w| w[0] == "-c" && is_source(&w[1]))
        .map(|w| &w[1]);
    let file = after_c.or_else(|| args.iter().rev().find(|a| is_source(a)))?;
    let path = Path::new(file);
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let rel = canon(path)
        .strip_prefix(canon(src))
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf());
    Some(rel.to_string_lossy().into_owned())
}

/// Opens the gate for one attempt of a build with `jobs` jobs: writes its config into `dir`
/// (the limit the plan gave, shrunk with the jobs after an OOM kill; this machine's figures
/// per unit, else the plan's figure per job) and returns the run's values for it: kiln's own
/// program and `dir`. `None` (the compiles run without the gate) where the build has no nvcc
/// or kiln cannot name its own program.
pub fn open(
    dir: &Path,
    cache: &Path,
    spec: &crate::resolve::spec::BuildSpec,
    jobs: usize,
    src: &Path,
) -> Option<(String, String)> {
    spec.nvcc.as_ref()?;
    let kiln = std::env::current_exe().ok()?;
    let kept = super::unit_memory::load(cache, &spec.memory_key);
    let (units, largest) = super::unit_memory::gate_figures(kept.as_ref());
    let config = Config {
        limit: spec
            .memory_limit
            .map(|l| l.saturating_mul(jobs as u64) / spec.jobs.max(1) as u64),
        unmeasured: largest.or(spec.memory_per_job),
        units,
        src: src.to_path_buf(),
    };
    std::fs::create_dir_all(dir).ok()?;
    // A new attempt: nothing measured or holding a slot yet.
    let _ = std::fs::remove_file(dir.join(MEASURED));
    let _ = std::fs::remove_file(dir.join(slots::TABLE));
    let bytes = serde_json::to_vec(&config).ok()?;
    crate::store::atomic::write(&dir.join(CONFIG), &bytes, crate::store::atomic::Sync::Cache).ok()?;
    Some((kiln.display().to_string(), dir.display().to_string()))
}

/// What the gate tells the build's log.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// The unit waits for memory (said once per unit).
    Waits(slots::Waiting),
    /// The compile runs without the gate, and why (its config or its table cannot be read).
    Ungated(String),
}

/// Runs `argv` (the compiler command) through the gate of `dir` (the build's `KILN_GATE`);
/// says how the compiler ended. Without a directory it only runs the command; where the
/// gate's files cannot be read or written it says so through `notice` and runs the command
/// ungated. `Err` only when the compiler could not be started.
pub fn run(argv: &[OsString], dir: Option<&Path>, notice: &mut dyn FnMut(Notice)) -> Result<CompilerExit, String> {
    let (program, args) = argv
        .split_first()
        .ok_or("kiln gate: no command to run (`kiln gate -- nvcc ...`)")?;
    let Some(dir) = dir else {
        return spawn_and_wait(program, args).map(|(exit, _)| exit);
    };
    let config = std::fs::read(dir.join(CONFIG))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice::<Config>(&b).map_err(|e| e.to_string()));
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            let why = format!("cannot read {}: {e}", dir.join(CONFIG).display());
            notice(Notice::Ungated(why));
            return spawn_and_wait(program, args).map(|(exit, _)| exit);
        }
    };
    let unit = unit_of(args, &config.src);
    // CMake's own checks (`CMakeFiles/CMakeScratch/TryCompile-*`, `CMakeFiles/CMakeTmp`) are
    // tiny and named anew each run: neither gated nor kept.
    if unit.as_deref().is_some_and(|u| u.contains("CMakeFiles/")) {
        return spawn_and_wait(program, args).map(|(exit, _)| exit);
    }
    let name = unit.clone().unwrap_or_else(|| "<no source file>".into());
    let estimate = unit
        .as_ref()
        .and_then(|u| config.units.get(u))
        .copied()
        .or(config.unmeasured)
        .unwrap_or(0);
    let on_wait = &mut |w: &slots::Waiting| notice(Notice::Waits(w.clone()));
    let slot = match config
        .limit
        .map(|limit| slots::enter(dir, &name, estimate, limit, on_wait))
    {
        Some(Err(e)) => {
            notice(Notice::Ungated(format!("{}: {e}", dir.join(slots::TABLE).display())));
            None
        }
        Some(Ok(slot)) => Some(slot),
        None => None,
    };
    let start = now();
    let (exit, peak) = spawn_and_wait(program, args)?;
    drop(slot);
    let behind_sccache = Path::new(program).file_name().is_some_and(|n| n == "sccache");
    if let (Some(unit), false) = (unit, behind_sccache) {
        let line = UnitRun {
            unit,
            peak,
            seconds: now() - start,
            ok: exit == CompilerExit::Code(0),
            start,
        };
        // One short line in one append: gates running side by side never interleave.
        if let Ok(mut text) = serde_json::to_string(&line) {
            text.push('\n');
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(MEASURED));
            let _ = file.and_then(|mut f| f.write_all(text.as_bytes()));
        }
    }
    Ok(exit)
}

/// Seconds since the epoch.
fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// How the compiler ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompilerExit {
    Code(i32),
    Signal(i32),
}

/// Runs the command to its end (it dies with the gate), sampling its tree's memory: four
/// samples a second for the first two seconds, then two. Returns how it ended and the peak
/// (at least the largest process's own peak, from the kernel's accounting of the command and
/// what it waited for).
fn spawn_and_wait(program: &OsString, args: &[OsString]) -> Result<(CompilerExit, u64), String> {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(program);
    command.args(args);
    // SAFETY: prctl is async-signal-safe; it only marks the child to be killed with the gate.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let child = command.spawn().map_err(|e| {
        let program = program.to_string_lossy();
        format!(
            "kiln gate: cannot run {program}: {e}; the build names it after `kiln gate --` in \
                 PYTORCH_NVCC or CMAKE_CUDA_COMPILER_LAUNCHER (this machine's nvcc when the plan was \
                 made): is it still there?"
        )
    })?;
    let pid = libc::pid_t::try_from(child.id()).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut peak = 0;
    let (status, largest) = loop {
        let mut status = 0;
        // SAFETY: wait4 writes the status and usage of this child into what it is given.
        let (done, usage) = unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            (libc::wait4(pid, &mut status, libc::WNOHANG, &mut u), u)
        };
        if done == pid {
            break (status, u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024);
        }
        if done < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(format!("kiln gate: lost the compiler: {e}"));
            }
        }
        peak = peak.max(crate::process::tree::resident(child.id()));
        let pause = if start.elapsed() < Duration::from_secs(2) {
            250
        } else {
            500
        };
        std::thread::sleep(Duration::from_millis(pause));
    };
    let exit = if libc::WIFSIGNALED(status) {
        CompilerExit::Signal(libc::WTERMSIG(status))
    } else {
        CompilerExit::Code(libc::WEXITSTATUS(status))
    };
    Ok((exit, peak.max(largest)))
}

#[cfg(test)]
mod tests;
