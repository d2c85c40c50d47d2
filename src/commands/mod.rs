//! Subcommands: each turns its arguments and the [`Settings`] into calls on the [`Session`] or
//! the core, and hands the results to `report` as typed reports. What the pipeline does lives
//! in `session`; what is printed, in `report`. This module owns the exit status and the
//! mapping of errors to it, and deliberately ignores everything else.

mod arch_cmd;
mod bundle;
mod cache;
mod check;
mod doctor;
pub mod gate;
mod install;
mod lock;
mod plan;
mod recipe_draft;
mod recipes;
mod verify;

use std::path::Path;
use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::lock::{Lock, LockError};
use crate::recipe::{LoadError, RecipeSet};
use crate::report;
use crate::resolve::solve::Conflict;
use crate::session::{Session, SessionError};
use crate::settings::Settings;

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

impl From<SessionError> for Failure {
    fn from(e: SessionError) -> Failure {
        match e {
            SessionError::Usage(m) => Failure::Usage(m),
            other => Failure::User(other.to_string()),
        }
    }
}

/// Runs the parsed command line: first puts back what a killed kiln left half done.
pub fn run(cli: Cli) -> ExitCode {
    crate::process::group::on_interrupt();
    crate::process::group::become_subreaper();
    let result = match cli.global.settings() {
        Ok(mut s) => {
            s.watch = report::watcher::watcher(&s);
            // Every command but `cache clean` says it uses the cache while it runs, so that a
            // clean leaves what it holds alone.
            let cleans = matches!(&cli.command, Command::Cache(c) if c.action.is_some());
            let _live = (!cleans).then(|| crate::store::locks::live(&s.cache_dir));
            recover(&s).and_then(|()| dispatch(&s, &cli.command))
        }
        Err(e) => Err(Failure::Usage(e.to_string())),
    };
    if crate::process::interrupted() {
        report::error("interrupted");
        return ExitCode::from(crate::process::INTERRUPTED_EXIT);
    }
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

/// Kills what a killed kiln's builds left running, and finishes or rolls back the install it
/// was in the middle of (its journal), saying so; a journal that cannot be read stops kiln.
fn recover(s: &Settings) -> Result<(), Failure> {
    let groups = s.cache_dir.join("groups");
    let killed = crate::process::group::reap_leftovers(&groups);
    crate::process::group::record_in(&groups);
    if killed > 0 {
        report::note(&format!(
            "killed {killed} process{} left running by a kiln that was stopped",
            if killed == 1 { "" } else { "es" }
        ));
    }
    let recovered = crate::store::journal::recover(&s.cache_dir).map_err(|e| Failure::User(e.to_string()))?;
    for r in recovered {
        report::note(&r.to_string());
    }
    Ok(())
}

/// Takes the environment's lock for a command that changes it; waits for another kiln (saying
/// for whom) unless `--no-wait`.
fn lock_env(s: &Settings) -> Result<crate::store::locks::Held, Failure> {
    use crate::store::locks;
    let (python, _) = crate::probe::python::choose(s.python.as_deref()).map_err(Failure::User)?;
    let what = format!("the environment of {}", python.display());
    let waiting = |h: &locks::Holder| report::note(&format!("waiting for another kiln changing {what}: {h}"));
    locks::take(&locks::env_lock(&s.cache_dir, &python), &what, !s.no_wait, waiting)
        .map_err(|e| Failure::User(e.to_string()))
}

fn dispatch(s: &Settings, command: &Command) -> CmdResult {
    let _env = match command {
        Command::Install(a) if !a.dry_run => Some(lock_env(s)?),
        _ => None,
    };
    match command {
        Command::Doctor(t) => doctor::run(s, &t.targets),
        Command::Plan(a) => plan::run(s, &a.targets.targets, a.for_node.as_deref()),
        Command::Check(a) => check::run(s, &a.targets, &a.command, a.prove_jit),
        Command::Install(a) => {
            let s = &Settings {
                jit_proof: !a.no_jit_proof,
                keep_done: a.keep_done,
                ..s.clone()
            };
            let aot = (a.aot || !a.aot_modules.is_empty()).then_some(&a.aot_modules[..]);
            match &a.bundle {
                _ if a.locked => install::run_locked(s, &a.targets.targets, a.dry_run, &a.lock, aot),
                Some(bundle) => install::run_bundle(s, &a.targets.targets, a.dry_run, bundle, aot),
                None => install::run(s, &a.targets.targets, a.dry_run, aot),
            }
        }
        Command::Bundle(a) => match &a.for_node {
            Some(node) => bundle::run_for(s, node, &a.targets, &a.output, a.split.map(|b| b.as_u64())),
            None => bundle::run(s, &a.lock, &a.output, a.split.map(|b| b.as_u64()), a.no_built_wheels),
        },
        Command::Cache(a) => cache::run(s, a.action.as_ref()),
        Command::Lock(a) => lock::run(s, &a.targets.targets, &a.output),
        Command::Verify(t) => verify::run(s, &t.targets),
        Command::Recipes(a) => recipes::run(s, a.name.as_deref()),
        Command::Recipe(a) => match &a.action {
            crate::cli::RecipeAction::Draft { name, release } => recipe_draft::run(s, name, release.as_deref()),
        },
        Command::Arch(a) => arch_cmd::run(s, a),
    }
}

/// Exit status 1 unless `ok`.
fn exit(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Reports a version conflict (JSON or text), each way out as the user's own command line
/// changed to take it, and turns it into exit status 1.
fn conflict(s: &Settings, c: &Conflict) -> Failure {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    report::conflict(&c.clone().for_command("kiln", &args), s.json);
    Failure::Reported
}

/// The recipes (`--recipes DIR`, else the embedded ones); problems in them are reported at
/// their `file:line:col`.
pub(crate) fn load_recipes(s: &Settings) -> Result<RecipeSet, Failure> {
    let loaded = match &s.recipes {
        Some(dir) => RecipeSet::from_dir(dir),
        None => RecipeSet::embedded(),
    };
    loaded.map_err(|e| match e {
        LoadError::Invalid(d) => {
            report::diagnostics(&d, s.json);
            Failure::Reported
        }
        other => Failure::User(other.to_string()),
    })
}

/// Opens a session on the recipes for `targets`.
fn open(s: &Settings, targets: &[String]) -> Result<Session, Failure> {
    Ok(Session::open(s, load_recipes(s)?, targets)?)
}

/// Reads a lockfile ([`crate::lock::read`]); a malformed one is reported at its line and column.
fn read_lock(s: &Settings, path: &Path) -> Result<Lock, Failure> {
    crate::lock::read(path).map_err(|e| match e {
        LockError::Invalid(d) => {
            report::diagnostic(&d, s.json);
            Failure::Reported
        }
        other => Failure::User(other.to_string()),
    })
}
