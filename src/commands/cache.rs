//! `kiln cache` and `kiln cache clean`: argument handling over [`crate::cache_dir`]. It never
//! touches the environment, and what a `--keep` lockfile needs is found as `kiln bundle` finds it.

use std::process::ExitCode;

use super::{CmdResult, Failure, Session, load_recipes};
use crate::cache_dir;
use crate::cli::{CacheAction, Global};
use crate::report;

pub fn run(g: &Global, action: Option<&CacheAction>) -> CmdResult {
    let cache = Session::cache_dir(g);
    let Some(CacheAction::Clean {
        wheels,
        sources,
        all,
        keep,
    }) = action
    else {
        let parts = cache_dir::parts(&cache);
        if g.json {
            report::json(&serde_json::json!({ "cache": cache, "parts": parts }));
        } else {
            report::cache_parts(&cache, &parts);
        }
        return Ok(ExitCode::SUCCESS);
    };
    // What the lockfile needs stays, whatever else goes.
    let kept: Vec<String> = match keep {
        Some(path) => {
            let lock = super::install::read_lock(g, path)?;
            let set = load_recipes(g)?;
            crate::bundle::contents(&lock, &set, &cache).0.entries
        }
        None => Vec::new(),
    };
    let mut parts: Vec<&str> = cache_dir::SCRATCH.to_vec();
    if *wheels || *all {
        parts.push("wheels");
    }
    if *sources || *all {
        parts.extend(["sources", "git"]);
    }
    if *all {
        parts.push("probe");
    }
    let mut freed = Vec::new();
    for part in parts {
        let bytes = cache_dir::clean(&cache, part, &kept)
            .map_err(|e| Failure::User(format!("cannot clean {}: {e}", cache.join(part).display())))?;
        freed.push((part, bytes));
    }
    if g.json {
        report::json(&serde_json::json!({ "cache": cache, "freed": freed, "kept": kept }));
    } else if !g.quiet {
        report::cache_cleaned(&cache, &freed, kept.len());
    }
    Ok(ExitCode::SUCCESS)
}
