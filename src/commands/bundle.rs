//! `kiln bundle`: a lockfile and the cached sources and wheels it needs, in one archive. It
//! never downloads: what the cache lacks is an error that says how to fill it.

use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, load_recipes, read_lock};
use crate::report::{self, bundle::Bundled};
use crate::settings::Settings;

pub fn run(settings: &Settings, lock_path: &Path, output: &Path) -> CmdResult {
    let lock = read_lock(settings, lock_path)?;
    let text = std::fs::read_to_string(lock_path)
        .map_err(|e| Failure::User(format!("cannot read {}: {e}", lock_path.display())))?;
    let set = load_recipes(settings)?;
    let cache = &settings.cache_dir;
    let (contents, missing) = crate::bundle::contents(&lock, &set, cache);
    if !missing.is_empty() {
        return Err(Failure::User(format!(
            "cannot bundle {}: kiln's cache ({}) lacks what reproducing it needs:\n  - {}\n  `kiln install --locked` on this node fills the cache",
            lock_path.display(),
            cache.display(),
            missing.join("\n  - ")
        )));
    }
    crate::bundle::write(output, &text, &contents, cache).map_err(|e| Failure::User(e.to_string()))?;
    let doc = Bundled {
        result: "ok",
        bundle: output,
        bytes: std::fs::metadata(output).map(|m| m.len()).unwrap_or(0),
        contents: &contents,
    };
    if settings.json {
        report::json_doc(&doc);
    } else if !settings.quiet {
        report::bundle::human(&doc);
    }
    Ok(ExitCode::SUCCESS)
}
