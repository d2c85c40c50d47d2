//! `kiln bundle`: a lockfile, the cached sources and wheels it needs, and a wheelhouse of the
//! third-party wheels an offline node needs to build and install them, in one archive (or in
//! parts of a given size). Sources and built wheels come from kiln's cache only: what it lacks
//! is an error that says how to fill it. Third-party wheels are fetched by `pip download` run by
//! the interpreter the lock was written from (offline: only from the wheelhouse already cached).

use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, conflict, load_recipes, read_lock};
use crate::bundle::{node_wheels, wheelhouse};
use crate::report::{self, bundle::Bundled};
use crate::session::Session;
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

    finish(settings, output, &text, &contents, &wanted, split, None)
}

/// Writes the bundle (and its parts) and says what it holds.
fn finish(
    settings: &Settings,
    output: &Path,
    lock_text: &str,
    contents: &crate::bundle::Contents,
    wanted: &wheelhouse::Wanted,
    split: Option<u64>,
    planned_for: Option<&str>,
) -> CmdResult {
    let cache = &settings.cache_dir;
    crate::bundle::write(output, lock_text, contents, cache, &settings.watch)
        .map_err(|e| Failure::User(e.to_string()))?;
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
        wheelhouse: wanted,
        contents,
        planned_for,
    };
    if settings.json {
        report::json_doc(&doc);
    } else if !settings.quiet {
        report::bundle::human(&doc);
    }
    Ok(ExitCode::SUCCESS)
}

/// `kiln bundle --for NODE [TARGETS]`: the plan for the node whose facts are in `node`, as a
/// planned lock, with the sources it installs from and the wheels it lacks for its tags.
pub fn run_for(settings: &Settings, node: &Path, targets: &[String], output: &Path, split: Option<u64>) -> CmdResult {
    let set = load_recipes(settings)?;
    let s = Session::open_for(settings, set, targets, node)?;
    let plan = s.plan(settings).map_err(|c| conflict(settings, &c))?;
    if plan.is_blocked() {
        if !settings.json {
            report::plan::human(&plan, &s.python, &s.facts.python.version);
        }
        return Err(Failure::User(format!(
            "cannot bundle for {}: the plan is blocked (above); nothing was written\n  each blocked step says what it needs; `kiln plan --for {} ...` shows the plan again once that is fixed",
            node.display(),
            node.display()
        )));
    }
    let facts = crate::probe::node::read(node).map_err(|e| Failure::User(e.to_string()))?;
    let cuda = s.machine.cuda_toolkit.as_ref().map(|t| t.version.to_string());
    let cache = &settings.cache_dir;
    let bad = |what: &str, problems: Vec<String>| {
        Failure::User(format!(
            "cannot bundle for {}: {what}:\n  - {}",
            node.display(),
            problems.join("\n  - ")
        ))
    };
    let mut lock = crate::bundle::planned::lock(&plan, &s.set, &s.facts, &plan.archs, cuda, &facts.host)
        .map_err(|p| bad("the plan cannot be written as a lock", p))?;
    let _ = std::fs::create_dir_all(cache.join("logs"));
    let log = cache.join("logs").join(format!("bundle-{}.log", std::process::id()));
    crate::bundle::planned::fetch_sources(&mut lock, &s.set, cache, settings.offline, &log, &settings.watch)
        .map_err(|p| bad("kiln cannot fetch what the node installs from", p))?;
    let (mut contents, missing) = crate::bundle::contents(&lock, &s.set, cache);
    if !missing.is_empty() {
        return Err(bad("kiln's cache lacks what the node installs from", missing));
    }
    let tags = facts
        .wheel_tags()
        .map_err(|e| Failure::User(format!("{}: {e}", node.display())))?;
    let target = node_wheels::NodeTarget::of(&s.facts.python.version, &tags)
        .map_err(|e| Failure::User(format!("{}: {e}", node.display())))?;
    let uv = crate::apply::install::UV;
    let uv = settings
        .watch
        .download("uv", &format!("uv {} wheel", uv.version), |p| uv.ensure(cache, settings.offline, p))
        .map_err(|e| {
            Failure::User(format!(
                "cannot resolve for the node without uv: {e}\n  run once with network (kiln brings uv from PyPI), or put uv on PATH"
            ))
        })?;
    let work = cache.join("work").join(format!("bundle-for-{}", std::process::id()));
    let run = node_wheels::Run {
        uv: &uv,
        cache,
        work: &work,
        offline: settings.offline,
        log: &log,
    };
    let wanted = node_wheels::resolve(&run, &lock, &s.set, &s.facts, &target);
    let _ = std::fs::remove_dir_all(&work);
    let wanted = wanted.map_err(|e| Failure::User(format!("{e}\n  log: {}", log.display())))?;
    let (here, _) = crate::probe::python::choose(settings.python.as_deref()).map_err(Failure::User)?;
    let files = node_wheels::fetch(
        &here,
        &wanted,
        &target,
        &crate::cache_dir::wheelhouse(cache),
        settings.offline,
        &log,
    )
    .map_err(|e| Failure::User(format!("{e}\n  log: {}", log.display())))?;
    contents.entries.extend(files.iter().map(|f| format!("wheelhouse/{f}")));
    let text = crate::lock::render(&lock);
    finish(settings, output, &text, &contents, &wanted, split, Some(&facts.host))
}
