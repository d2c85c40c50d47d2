//! `kiln bundle`: a lockfile and the cached sources and wheels it needs, in one archive. It
//! never downloads: what the cache lacks is an error that says how to fill it.

use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, Session, load_recipes};
use crate::cli::Global;
use crate::report;

pub fn run(g: &Global, lock_path: &Path, output: &Path) -> CmdResult {
    let lock = super::install::read_lock(g, lock_path)?;
    let text = std::fs::read_to_string(lock_path)
        .map_err(|e| Failure::User(format!("cannot read {}: {e}", lock_path.display())))?;
    let set = load_recipes(g)?;
    let cache = Session::cache_dir(g);
    let (contents, missing) = crate::bundle::contents(&lock, &set, &cache);
    if !missing.is_empty() {
        return Err(Failure::User(format!(
            "cannot bundle {}: kiln's cache ({}) lacks what reproducing it needs:\n  - {}\n  `kiln install --locked` on this node fills the cache",
            lock_path.display(),
            cache.display(),
            missing.join("\n  - ")
        )));
    }
    crate::bundle::write(output, &text, &contents, &cache).map_err(|e| Failure::User(e.to_string()))?;
    let size = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
    if g.json {
        report::json(&serde_json::json!({ "result": "ok", "bundle": output, "bytes": size, "contents": contents }));
    } else if !g.quiet {
        report::bundle_written(output, size, &contents);
    }
    Ok(ExitCode::SUCCESS)
}
