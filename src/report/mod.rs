//! Everything kiln prints: tables for people, JSON for machines, errors on stderr. One file per
//! command draws that command's typed report ([`doctor::Doctor`], [`install::Install`], ...);
//! this file holds what they share: JSON output, errors, diagnostics and conflicts.
//!
//! Data goes to stdout, progress and errors to stderr. Colour is not used, so nothing depends
//! on it. Core types are printed here and only here. It deliberately ignores where the data
//! came from: it imports no command, session or command-line code.

pub mod arch;
pub mod bundle;
pub mod cache;
pub mod check;
pub mod doctor;
pub mod install;
pub mod json;
pub mod lock;
pub mod plan;
pub mod progress;
pub mod reason;
mod reason_notes;
pub mod recipe_draft;
pub mod recipes;
mod served_proof;
pub mod serving;
pub mod timings;
pub mod toolkit_parts;
pub mod verify;
pub mod watcher;

use serde::Serialize;

use crate::process::secrets::mask_urls;

use crate::recipe::Diagnostics;
use crate::recipe::diag::Diagnostic;
use crate::resolve::solve::Conflict;

/// Prints `v` as pretty JSON, fields in the order its type declares them.
pub fn json<T: Serialize + ?Sized>(v: &T) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => println!("{}", mask_urls(&s)),
        Err(e) => error(&format!("cannot encode JSON: {e}")),
    }
}

/// Prints a report document as pretty JSON through a [`serde_json::Value`], so its keys come
/// out in name order at every level (kiln's JSON documents have always been printed so).
pub fn json_doc<T: Serialize + ?Sized>(v: &T) {
    match serde_json::to_value(v) {
        Ok(v) => json(&v),
        Err(e) => error(&format!("cannot encode JSON: {e}")),
    }
}

pub fn error(msg: &str) {
    eprintln!("error: {}", mask_urls(msg));
}

/// Something the user should know that is not an error (a rollback of what a killed kiln left).
pub fn note(msg: &str) {
    eprintln!("note: {}", mask_urls(msg));
}

/// Problems in recipe files, each at its `file:line:col`.
pub fn diagnostics(d: &Diagnostics, as_json: bool) {
    if as_json {
        json_doc(&Errors { errors: &d.0 });
    }
    eprintln!("{d}");
}

/// One problem in a file that is not a recipe (a lockfile).
pub fn diagnostic(d: &Diagnostic, as_json: bool) {
    if as_json {
        json_doc(&Errors {
            errors: std::slice::from_ref(d),
        });
    }
    eprintln!("{d}");
}

#[derive(Serialize)]
struct Errors<'a> {
    errors: &'a [Diagnostic],
}

/// No set of versions fits: the reasons, the ways out a second solve proved (each with the
/// command that takes it, when [`Conflict::for_command`] made one), or what was solved again in
/// vain (stderr; with `as_json` also the conflict on stdout).
pub fn conflict(c: &Conflict, as_json: bool) {
    #[derive(Serialize)]
    struct Doc<'a> {
        conflict: &'a Conflict,
    }
    if as_json {
        json_doc(&Doc { conflict: c });
    }
    eprintln!("error: no set of versions satisfies every constraint, because:");
    for l in &c.because {
        eprintln!("  - {l}");
    }
    for n in &c.notes {
        eprintln!("note: {n}");
    }
    if !c.ways_out.is_empty() {
        eprintln!("\nways out (each checked by solving again):");
        for w in &c.ways_out {
            eprintln!("  - {}", w.says);
            if let Some(cmd) = &w.command {
                eprintln!("      {cmd}");
            }
        }
    } else if c.tried.is_empty() {
        eprintln!(
            "\nno way out kiln can check: no installed component it keeps and no pin of yours takes part; the recipes' own constraints disagree"
        );
    } else {
        eprintln!(
            "\nno way out: kiln solved again {} and found no solution either; change a recipe",
            c.tried
                .iter()
                .map(|t| format!("with {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}
