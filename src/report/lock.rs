//! `kiln lock`: what was locked and where, or why nothing was. It deliberately ignores the
//! lockfile's own text (that is `lock`).

use std::path::Path;

use serde::Serialize;

use crate::lock::Lock;

/// What `kiln lock --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
#[serde(tag = "result")]
pub enum Locked<'a> {
    /// The lock was written.
    #[serde(rename = "ok")]
    Written { lockfile: &'a Path, lock: &'a Lock },
    /// Nothing was written: these components are not proven.
    #[serde(rename = "refused")]
    Refused { because: &'a [String] },
}

/// The lock written to `path`, for a person.
pub fn written(path: &Path, lock: &Lock) {
    for c in &lock.components {
        println!("locked {} {} ({})", c.name, c.version, c.source);
    }
    let archs: Vec<String> = lock.environment.archs.iter().map(|a| a.to_string()).collect();
    println!(
        "wrote {}: {} component{} for Python {}, arch {}",
        path.display(),
        lock.components.len(),
        if lock.components.len() == 1 { "" } else { "s" },
        lock.environment.python,
        if archs.is_empty() {
            "none".to_string()
        } else {
            archs.join(",")
        }
    );
}
