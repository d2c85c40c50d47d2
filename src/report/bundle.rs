//! `kiln bundle`: what went into the bundle, what was left out, and how to use it. It
//! deliberately ignores the bundle's layout (that is `bundle`).

use std::path::Path;

use serde::Serialize;

use super::megabytes;
use crate::bundle::Contents;

/// What `kiln bundle --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
pub struct Bundled<'a> {
    pub result: &'static str,
    pub bundle: &'a Path,
    pub bytes: u64,
    pub contents: &'a Contents,
}

/// The bundle written, for a person.
pub fn human(b: &Bundled) {
    for e in &b.contents.entries {
        println!("bundled {e}");
    }
    for l in &b.contents.left_out {
        println!("left out: {l}");
    }
    println!(
        "wrote {}: the lock and {} cache entr{} ({}); on the target: kiln install --bundle {}",
        b.bundle.display(),
        b.contents.entries.len(),
        if b.contents.entries.len() == 1 { "y" } else { "ies" },
        megabytes(b.bytes),
        b.bundle.display()
    );
}
