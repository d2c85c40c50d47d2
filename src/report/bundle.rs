//! `kiln bundle`: what went into the bundle, what was left out, and how to use it. It
//! deliberately ignores the bundle's layout (that is `bundle`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::megabytes;
use crate::bundle::Contents;
use crate::bundle::wheelhouse::Wanted;

/// What `kiln bundle --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
pub struct Bundled<'a> {
    pub result: &'static str,
    pub bundle: &'a Path,
    pub bytes: u64,
    /// The files written: the bundle itself, or its parts in order.
    pub parts: &'a [PathBuf],
    /// The third-party wheels it was asked to carry.
    pub wheelhouse: &'a Wanted,
    pub contents: &'a Contents,
    /// The node a `bundle --for` planned it for: nothing in it is proven yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_for: Option<&'a str>,
}

/// The bundle written, for a person.
pub fn human(b: &Bundled) {
    for e in &b.contents.entries {
        println!("bundled {e}");
    }
    for l in &b.contents.left_out {
        println!("left out: {l}");
    }
    let wheels = b
        .contents
        .entries
        .iter()
        .filter(|e| e.starts_with("wheelhouse/"))
        .count();
    println!(
        "wrote {}: the lock, {} cache entr{} and {wheels} third-party wheel{} ({})",
        b.bundle.display(),
        b.contents.entries.len() - wheels,
        if b.contents.entries.len() - wheels == 1 {
            "y"
        } else {
            "ies"
        },
        if wheels == 1 { "" } else { "s" },
        megabytes(b.bytes),
    );
    if b.parts.len() > 1 {
        println!("split into {} parts:", b.parts.len());
        for p in b.parts {
            let size = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            println!("  {} ({})", p.display(), megabytes(size));
        }
    }
    if let Some(node) = b.planned_for {
        println!(
            "planned for {node}: nothing in it is proven yet; `kiln install --bundle` there installs it, runs every proof and writes the proven kiln.lock"
        );
    }
    println!(
        "on the target (no network needed): kiln install --bundle {}",
        b.parts[0].display()
    );
}
