//! A step that failed, as data: the phase, why ([`StepError`]), the command that failed (with
//! its typed exit, log and last lines), what became of the environment ([`Restored`]) and, for
//! a failure kiln recognises, a [`Hint`]. Prose is made only when these are shown: each type's
//! `Display` (and its JSON, which is that text) is the sentence the user has always read.
//!
//! It also classifies failed commands: whether a compile was killed for memory (which the wheel
//! build answers with a retry on fewer jobs) and which known mistake a log shows. It
//! deliberately ignores the terminal: `report` renders a failure.

use std::path::PathBuf;

use serde::{Serialize, Serializer};

use super::Phase;
use super::source::SourceError;
use crate::probe::python::ProbeError;
use crate::process::{CommandFailed, Exit, SIGKILL};
use crate::store::backup::BackupError;

/// A step that failed, with what the user needs to see.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {phase} failed: {message}")]
pub struct BuildFailure {
    pub name: String,
    pub phase: Phase,
    /// Why (boxed: a failure travels through every `Result` of the build).
    pub message: Box<StepError>,
    pub command: Option<Box<CommandFailed>>,
    /// How the environment was put back.
    pub restored: Restored,
    pub hint: Option<Hint>,
    /// For a wheel that built but failed verification: whose fault it was, and whether the
    /// wheel was kept in the wheel cache.
    pub wheel: Option<Box<WheelFate>>,
}

impl BuildFailure {
    /// A failure before anything was installed.
    pub fn new(name: &str, phase: Phase, message: StepError) -> BuildFailure {
        BuildFailure {
            name: name.to_string(),
            phase,
            message: Box::new(message),
            command: None,
            restored: Restored::Unchanged,
            hint: None,
            wheel: None,
        }
    }

    /// A command that failed, with the hint its output calls for.
    pub fn of_command(name: &str, phase: Phase, e: CommandFailed) -> BuildFailure {
        BuildFailure {
            name: name.to_string(),
            phase,
            message: Box::new(StepError::Exited {
                command: e.command.clone(),
                status: e.status.clone(),
            }),
            hint: hint_for(&e),
            command: Some(Box::new(e)),
            restored: Restored::Unchanged,
            wheel: None,
        }
    }
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("no recipe")]
    NoRecipe,
    #[error("the recipe has no source")]
    NoSource,
    #[error("the plan has no build for this step")]
    NoSpec,
    #[error("`{command}` exited with {status}")]
    Exited { command: String, status: Exit },
    #[error("{0}")]
    Source(#[from] SourceError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the Rust crate at {manifest}: {detail}")]
    CargoMetadata { manifest: String, detail: String },
    #[error("an empty command")]
    EmptyCommand,
    #[error("the build command succeeded but wrote no wheel to {}", dir.display())]
    NoWheel { dir: PathBuf },
    #[error("the build wrote {0} wheels; expected one")]
    ManyWheels(usize),
    #[error("{0}")]
    WheelRefused(#[from] super::wheels::Refused),
    #[error("{0}")]
    Backup(#[from] BackupError),
    #[error("{dist} is not listed after installing it")]
    NotListed { dist: String },
    #[error("{0}")]
    Probe(#[from] ProbeError),
    /// Each import that failed, with its error.
    #[error("{}", imports_failed(.0))]
    Imports(Vec<(String, String)>),
    #[error("smoke test failed: {0}")]
    Smoke(String),
    /// Installed in one call with the steps whose builds finished with it (`batch`), which
    /// then failed.
    #[error("installed in one call with the steps that finished with it, which then failed: {why}")]
    Batch { why: String },
}

impl StepError {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StepError {
        let context = context.into();
        move |source| StepError::Io { context, source }
    }
}

fn imports_failed(failed: &[(String, String)]) -> String {
    failed
        .iter()
        .map(|(m, e)| format!("import {m} failed: {e}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What became of the environment after a failure.
#[derive(Debug, thiserror::Error)]
pub enum Restored {
    #[error("nothing was installed; the environment is unchanged")]
    Unchanged,
    /// Nothing of this step was installed, but the run had proven steps before it.
    #[error("{}", if *kept {
        "nothing of it was installed; the steps this run proved before it stay (--keep-done)"
    } else {
        "nothing of it was installed; the steps this run proved before it were rolled back"
    })]
    NotReached { kept: bool },
    #[error("{dist} was removed again; it was not installed before")]
    Removed { dist: String },
    #[error("the previous {dist} was restored ({files} files)")]
    Restored { dist: String, files: usize },
    #[error("RESTORE FAILED: {error}; see {}", log.display())]
    Failed { error: Box<BackupError>, log: PathBuf },
}

/// What became of a wheel that built (or came from the wheel cache) but failed verification.
#[derive(Debug, thiserror::Error)]
pub enum WheelFate {
    #[error(
        "kept, built but unverified, at {}: the failure is outside the wheel ({why}); the next run \
         installs it and verifies it again instead of compiling",
        path.display()
    )]
    Kept { path: PathBuf, why: String },
    #[error("the failure is outside the wheel ({why}), but the wheel could not be kept: {error}")]
    NotKept { why: String, error: String },
    #[error("not kept: the failure is the wheel's own ({why})")]
    Own { why: String },
}

/// A failure kiln recognises, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Hint {
    #[error("the compiler was killed, most likely by the OOM killer: retry with a smaller `--jobs`")]
    OomKilled,
    #[error("this build needs torch in the environment first: `kiln install torch`")]
    NeedsTorch,
    #[error("the environment lacks the `wheel` package needed by setuptools < 70.1")]
    NoWheelPackage,
    #[error("nvcc is not on PATH: set CUDA_HOME to a CUDA toolkit")]
    NoNvcc,
    /// The build tried to download something (`Could not resolve host: github.com`).
    #[error(
        "the build tried to reach {host}: it downloads a source the recipe does not declare; declare \
         it as a build input ([[build.inputs]] or [[versions.inputs]], with the variable that points \
         the build at a local copy) so that kiln fetches it first"
    )]
    Network { host: Box<String> },
}

/// Why a failed command counts as killed for memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OomKill {
    /// The command itself died of SIGKILL, what the OOM killer sends.
    Signal,
    /// Something under it said a child was killed (gcc's "Killed signal terminated program
    /// cc1plus", a shell's "Killed"): pip, setuptools and the compiler driver stand between
    /// kiln and the compiler, so the signal itself is not kiln's to see.
    Reported,
}

/// Whether `e` looks like a compile killed for memory.
pub fn oom_kill(e: &CommandFailed) -> Option<OomKill> {
    if e.status == Exit::Signal(SIGKILL) {
        return Some(OomKill::Signal);
    }
    e.tail
        .iter()
        .any(|l| l.contains("Killed") || l.contains("signal 9"))
        .then_some(OomKill::Reported)
}

/// The jobs to retry a failed compile with: half, when it was killed for memory and ran more
/// than one; `None` when a retry would not help.
pub fn retry_jobs(jobs: usize, e: &CommandFailed) -> Option<usize> {
    (jobs > 1 && oom_kill(e).is_some()).then(|| (jobs / 2).max(1))
}

/// Known failures, recognised from the command's exit and last lines.
pub fn hint_for(e: &CommandFailed) -> Option<Hint> {
    if oom_kill(e).is_some() {
        return Some(Hint::OomKilled);
    }
    let text = e.tail.join("\n");
    if text.contains("No module named 'torch'") {
        return Some(Hint::NeedsTorch);
    }
    if text.contains("invalid command 'bdist_wheel'") {
        return Some(Hint::NoWheelPackage);
    }
    if text.contains("nvcc: not found") || text.contains("nvcc not found") {
        return Some(Hint::NoNvcc);
    }
    e.causes
        .iter()
        .chain(&e.tail)
        .find_map(|l| unreachable_host(l))
        .map(|host| Hint::Network { host: Box::new(host) })
}

/// The host a line of build output says could not be reached, when it says so: git and curl
/// (`Could not resolve host: github.com`, `Failed to connect to github.com port 443`), Python
/// (`HTTPSConnectionPool(host='pypi.org', ...)` with a resolution or connection error), and a
/// bare `Temporary failure in name resolution` or `Network is unreachable` (host from a URL in
/// the line, else "the network").
pub fn unreachable_host(line: &str) -> Option<String> {
    let lower = line.to_lowercase();
    let host_at = |marker: &str| {
        lower.find(marker).map(|i| {
            line[i + marker.len()..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .collect::<String>()
        })
    };
    let from_url = || {
        ["https://", "http://"].iter().find_map(|scheme| {
            let at = line.find(scheme)? + scheme.len();
            let host: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .collect();
            (!host.is_empty()).then_some(host)
        })
    };
    let named = |h: Option<String>| h.filter(|h| !h.is_empty());
    if let Some(h) = named(host_at("could not resolve host:")) {
        return Some(h);
    }
    if let Some(h) = named(host_at("failed to connect to")) {
        return Some(h);
    }
    let network = [
        "temporary failure in name resolution",
        "name or service not known",
        "network is unreachable",
    ]
    .iter()
    .any(|m| lower.contains(m))
        || (lower.contains("connectionpool(host=") && lower.contains("max retries exceeded"));
    if !network {
        return None;
    }
    named(host_at("connectionpool(host='"))
        .or_else(from_url)
        .or_else(|| Some("the network".to_string()))
}

/// Each of these is written as its sentence in `--json` output.
macro_rules! serialize_as_text {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}
serialize_as_text!(StepError, Restored, Hint, WheelFate);

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(status: Exit, tail: &[&str]) -> CommandFailed {
        CommandFailed {
            command: "python -m pip wheel .".into(),
            status,
            log: PathBuf::from("/logs/x.wheel.log"),
            tail: tail.iter().map(|s| s.to_string()).collect(),
            causes: Vec::new(),
        }
    }

    #[test]
    fn a_compile_killed_for_memory_is_retried_with_half_the_jobs_down_to_one() {
        let killed = failed(Exit::Signal(SIGKILL), &[]);
        assert_eq!(oom_kill(&killed), Some(OomKill::Signal));
        assert_eq!(retry_jobs(8, &killed), Some(4));
        assert_eq!(retry_jobs(3, &killed), Some(1));
        assert_eq!(retry_jobs(1, &killed), None, "one job is as low as it goes");
        let reported = failed(
            Exit::Code(1),
            &["gcc: fatal error: Killed signal terminated program cc1plus"],
        );
        assert_eq!(oom_kill(&reported), Some(OomKill::Reported));
        assert_eq!(retry_jobs(2, &reported), Some(1));
        // Other signals and plain failures are not memory.
        assert_eq!(retry_jobs(8, &failed(Exit::Signal(11), &[])), None);
        assert_eq!(retry_jobs(8, &failed(Exit::Code(1), &["error: expected ';'"])), None);
        assert_eq!(
            retry_jobs(8, &failed(Exit::TimedOut(std::time::Duration::from_secs(9)), &[])),
            None
        );
    }

    #[test]
    fn known_failures_get_their_hint() {
        let hint = |status, line: &str| hint_for(&failed(status, &[line]));
        assert_eq!(hint(Exit::Signal(SIGKILL), ""), Some(Hint::OomKilled));
        assert_eq!(
            hint(Exit::Code(1), "ModuleNotFoundError: No module named 'torch'"),
            Some(Hint::NeedsTorch)
        );
        assert_eq!(
            hint(Exit::Code(1), "error: invalid command 'bdist_wheel'"),
            Some(Hint::NoWheelPackage)
        );
        assert_eq!(hint(Exit::Code(127), "sh: 1: nvcc: not found"), Some(Hint::NoNvcc));
        assert_eq!(hint(Exit::Code(1), "something else"), None);
        let fetch =
            "fatal: unable to access 'https://github.com/triton-lang/triton.git/': Could not resolve host: github.com";
        assert_eq!(
            hint(Exit::Code(1), fetch),
            Some(Hint::Network {
                host: Box::new("github.com".into())
            })
        );
        let pip = "WARNING: Retrying ... HTTPSConnectionPool(host='pypi.org', port=443): Max retries exceeded with url: /simple/x/ (Caused by NewConnectionError(... [Errno -3] Temporary failure in name resolution'))";
        assert_eq!(unreachable_host(pip).as_deref(), Some("pypi.org"));
        assert_eq!(
            unreachable_host("curl: (7) Failed to connect to example.org port 443 after 1 ms").as_deref(),
            Some("example.org")
        );
        assert_eq!(
            unreachable_host("urlopen error [Errno 101] Network is unreachable").as_deref(),
            Some("the network")
        );
        assert_eq!(unreachable_host("error: expected ';' before 'host'"), None);
    }

    #[test]
    fn a_failed_command_reads_as_it_always_did() {
        let f = BuildFailure::of_command("fixture-cext", Phase::Wheel, failed(Exit::Code(1), &["boom"]));
        assert_eq!(
            f.to_string(),
            "fixture-cext: wheel failed: `python -m pip wheel .` exited with exit status 1"
        );
        assert_eq!(
            f.restored.to_string(),
            "nothing was installed; the environment is unchanged"
        );
        assert_eq!(f.hint, None);
        let json = serde_json::json!({ "phase": f.phase, "message": f.message, "restored": f.restored });
        assert_eq!(json["phase"], "wheel");
        assert_eq!(json["message"], "`python -m pip wheel .` exited with exit status 1");
        let imports = StepError::Imports(vec![("a".into(), "ImportError: x".into()), ("b".into(), "?".into())]);
        assert_eq!(
            imports.to_string(),
            "import a failed: ImportError: x; import b failed: ?"
        );
    }
}
