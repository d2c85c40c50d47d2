//! `kiln cache` and `kiln cache clean`: argument handling over [`crate::cache_dir`]. It never
//! touches the environment, and what a `--keep` lockfile needs is found as `kiln bundle` finds it.

use std::process::ExitCode;

use super::{CmdResult, Failure, load_recipes, read_lock};
use crate::cache_dir;
use crate::cli::CacheAction;
use crate::report::{self, cache as show};
use crate::settings::Settings;

pub fn run(settings: &Settings, action: Option<&CacheAction>) -> CmdResult {
    let cache = &settings.cache_dir;
    if let Some(CacheAction::AddMirror { url, dir }) = action {
        let seeded = crate::store::mirror::seed(url, dir, cache).map_err(|e| {
            Failure::User(format!(
                "cannot seed the mirror of {url} from {}: {e}\n  hint: name a local clone or bare repository (`git clone --mirror URL DIR` where the origin can be reached)",
                dir.display()
            ))
        })?;
        if settings.json {
            report::json_doc(&seeded);
        } else if !settings.quiet {
            show::seeded(&seeded);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(CacheAction::Clean {
        wheels,
        sources,
        all,
        keep,
    }) = action
    else {
        let parts = cache_dir::parts(cache);
        let unverified: Vec<show::Unverified> = crate::store::wheels::unverified(cache)
            .into_iter()
            .map(|(wheel, u)| show::Unverified { wheel, why: u.why })
            .collect();
        let doc = show::Parts {
            cache,
            parts: &parts,
            unverified: &unverified,
        };
        if settings.json {
            report::json_doc(&doc);
        } else {
            show::parts(&doc);
        }
        return Ok(ExitCode::SUCCESS);
    };
    // What the lockfile needs stays, whatever else goes.
    let kept: Vec<String> = match keep {
        Some(path) => {
            let lock = read_lock(settings, path)?;
            let set = load_recipes(settings)?;
            crate::bundle::contents(&lock, &set, cache).0.entries
        }
        None => Vec::new(),
    };
    let mut parts: Vec<&str> = cache_dir::SCRATCH.to_vec();
    if *wheels || *all {
        // Modules compiled ahead of time are compiled output like wheels.
        parts.extend(["wheels", "aot"]);
    }
    if *sources || *all {
        parts.extend(["sources", "git"]);
    }
    if *all {
        parts.extend(["probe", "jit"]);
    }
    // No kiln starts using the cache while it is cleaned; what live kilns and journals hold
    // stays.
    let _cleaning = crate::store::locks::cleaning(cache).map_err(|e| Failure::User(e.to_string()))?;
    let guard = cache_dir::Guard::of(cache);
    let mut freed = Vec::new();
    let mut skipped = Vec::new();
    for part in parts {
        let (bytes, left) = cache_dir::clean(cache, part, &kept, &guard)
            .map_err(|e| Failure::User(format!("cannot clean {}: {e}", cache.join(part).display())))?;
        freed.push((part, bytes));
        skipped.extend(left);
    }
    let doc = show::Cleaned {
        cache,
        freed: &freed,
        kept: &kept,
        skipped: &skipped,
    };
    if settings.json {
        report::json_doc(&doc);
    } else if !settings.quiet {
        show::cleaned(&doc);
    }
    Ok(ExitCode::SUCCESS)
}
