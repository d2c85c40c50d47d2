//! Subcommands: each turns its arguments and the [`Settings`] into calls on the [`Session`] or
//! the core, and hands the results to `report` as typed reports. What the pipeline does lives
//! in `session`; what is printed, in `report`. This module owns the exit status and the
//! mapping of errors to it, and deliberately ignores everything else.

mod arch_cmd;
mod bundle;
mod cache;
mod doctor;
mod install;
mod lock;
mod plan;
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

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.global.settings() {
        Ok(s) => dispatch(&s, &cli.command),
        Err(e) => Err(Failure::Usage(e.to_string())),
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

fn dispatch(s: &Settings, command: &Command) -> CmdResult {
    match command {
        Command::Doctor(t) => doctor::run(s, &t.targets),
        Command::Plan(t) => plan::run(s, &t.targets),
        Command::Install(a) => {
            let s = &Settings {
                jit_proof: !a.no_jit_proof,
                ..s.clone()
            };
            match &a.bundle {
                _ if a.locked => install::run_locked(s, &a.targets.targets, a.dry_run, &a.lock),
                Some(bundle) => install::run_bundle(s, &a.targets.targets, a.dry_run, bundle),
                None => install::run(s, &a.targets.targets, a.dry_run, a.aot),
            }
        }
        Command::Bundle(a) => bundle::run(s, &a.lock, &a.output, a.split.map(|b| b.as_u64()), a.no_built_wheels),
        Command::Cache(a) => cache::run(s, a.action.as_ref()),
        Command::Lock(a) => lock::run(s, &a.targets.targets, &a.output),
        Command::Verify(t) => verify::run(s, &t.targets),
        Command::Recipes(a) => recipes::run(s, a.name.as_deref()),
        Command::Arch(a) => arch_cmd::run(s, a),
    }
}

/// Exit status 1 unless `ok`.
fn exit(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Reports a version conflict (JSON or text) and turns it into exit status 1.
fn conflict(s: &Settings, c: &Conflict) -> Failure {
    report::conflict(c, s.json);
    Failure::Reported
}

/// The recipes (`--recipes DIR`, else the embedded ones); problems in them are reported at
/// their `file:line:col`.
fn load_recipes(s: &Settings) -> Result<RecipeSet, Failure> {
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
