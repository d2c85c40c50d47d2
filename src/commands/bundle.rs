//! `kiln bundle`: a lockfile, the cached sources and wheels it needs, and a wheelhouse of the
//! third-party wheels an offline node needs to build and install them, in one archive (or in
//! parts of a given size). Sources and built wheels come from kiln's cache only: what it lacks
//! is an error that says how to fill it. Third-party wheels are fetched by `pip download` run by
//! the interpreter the lock was written from (offline: only from the wheelhouse already cached).

use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, load_recipes, read_lock};
use crate::bundle::wheelhouse;
use crate::report::{self, bundle::Bundled};
use crate::settings::Settings;

pub fn run(
    settings: &Settings,
    lock_path: &Path,
    output: &Path,
    split: Option<u64>,
    no_built_wheels: bool,
) -> CmdResult {
    let lock = read_lock(settings, lock_path)?;
    // Read as `read_lock` read it (a regular file within the lock's limit).
    let bytes = crate::state::read(lock_path, crate::state::LOCK_LIMIT, "give a lockfile `kiln lock` wrote")
        .map_err(|e| Failure::User(e.to_string()))?
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let set = load_recipes(settings)?;
    let cache = &settings.cache_dir;
    let (mut contents, missing) = crate::bundle::contents(&lock, &set, cache);
    if !missing.is_empty() {
        return Err(Failure::User(format!(
            "cannot bundle {}: kiln's cache ({}) lacks what reproducing it needs:\n  - {}\n  `kiln install --locked` on this node fills the cache",
            lock_path.display(),
            cache.display(),
            missing.join("\n  - ")
        )));
    }

    if no_built_wheels {
        let before = contents.entries.len();
        contents.entries.retain(|e| !e.starts_with("wheels/"));
        if contents.entries.len() < before {
            contents.left_out.push(format!(
                "{} wheel{} kiln built (--no-built-wheels): the target builds from the bundled sources",
                before - contents.entries.len(),
                if before - contents.entries.len() == 1 { "" } else { "s" }
            ));
        }
    }

    // The wheelhouse is read off the environment the lock was written from.
    let (python, _) = crate::probe::python::choose(settings.python.as_deref()).map_err(Failure::User)?;
    let facts =
        crate::probe::python::probe(&python, &[], settings.import_timeout).map_err(|e| Failure::User(e.to_string()))?;
    let minor = |v: &str| v.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
    if minor(&facts.python.version) != minor(&lock.environment.python) {
        return Err(Failure::User(format!(
            "{} was written for Python {}; {} is Python {}: the bundle's wheels are fetched for the lock's interpreter, so pass --python with the environment the lock was written from",
            lock_path.display(),
            lock.environment.python,
            python.display(),
            facts.python.version
        )));
    }
    let wanted = wheelhouse::wanted(&lock, &set, &facts);
    let log = cache.join("logs").join(format!("bundle-{}.log", std::process::id()));
    let _ = std::fs::create_dir_all(cache.join("logs"));
    let files = wheelhouse::fetch(
        &python,
        &wanted,
        &crate::cache_dir::wheelhouse(cache),
        settings.offline,
        &log,
    )
    .map_err(|e| {
        Failure::User(format!(
            "{e}{}",
            if settings.offline {
                "\n  offline, the wheels must already be in kiln's wheelhouse; run `kiln bundle` once with network"
            } else {
                ""
            }
        ))
    })?;
    contents.entries.extend(files.iter().map(|f| format!("wheelhouse/{f}")));
    contents
        .left_out
        .extend(wanted.unmet.iter().map(|u| format!("{u}: the target must have it")));

    crate::bundle::write(output, &text, &contents, cache).map_err(|e| Failure::User(e.to_string()))?;
    let bytes = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
    let parts = match split {
        Some(max) => crate::bundle::parts::split(output, max).map_err(|e| Failure::User(e.to_string()))?,
        None => vec![output.to_path_buf()],
    };
    let doc = Bundled {
        result: "ok",
        bundle: output,
        bytes,
        parts: &parts,
        wheelhouse: &wanted,
        contents: &contents,
    };
    if settings.json {
        report::json_doc(&doc);
    } else if !settings.quiet {
        report::bundle::human(&doc);
    }
    Ok(ExitCode::SUCCESS)
}
