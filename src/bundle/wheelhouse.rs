//! The wheelhouse a bundle carries: the third-party wheels that reproducing a lock on a node
//! without network needs, beside the sources and built wheels kiln caches itself.
//!
//! - Each component kiln builds from source needs its recipe's `[build] requires` (and what they
//!   require) to build again.
//! - Each component kiln installed needs its runtime dependencies: found by walking the
//!   `Requires-Dist` of what is installed in the environment the lock was written from (markers
//!   evaluated for that interpreter, extras followed), each pinned to the version installed there.
//!   The walk stops at what the lock says the target already has (`installed` components, such as
//!   the machine's own torch): the target brings those and what they need. A distribution that
//!   both sides need (torch and flashinfer both need `cuda-bindings`) is carried all the same: a
//!   component may need another version of it than the target happens to have.
//!
//! The wheels are fetched by `pip download` run by that same interpreter (`--only-binary=:all:`),
//! so they fit the target's Python and platform; they are kept in the cache's `wheelhouse/` and
//! installed offline from there (`--find-links`). It deliberately ignores dependencies that exist
//! only as sdists: an offline node could not build them without their own build requirements, so
//! pip's refusal names them and no bundle is written.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use pep508_rs::{ExtraName, MarkerEnvironment, Requirement};

use crate::lock::{Lock, NOT_BY_KILN};
use crate::probe::python::{PythonFacts, normalize};
use crate::process::{Cmd, CommandFailed};
use crate::recipe::RecipeSet;

/// What the wheelhouse must hold for one lock.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Wanted {
    /// `name==version` of each runtime dependency (and index-installed component), fetched alone.
    pub pinned: Vec<String>,
    /// Per built component, its build requirements, fetched with what they require.
    pub build_requires: Vec<(String, Vec<String>)>,
    /// Requirements that name nothing installed here (not fetched; the target must have them).
    pub unmet: Vec<String>,
}

/// What `lock`'s components need from the wheelhouse, read off `facts`, the environment the
/// lock was written from.
pub fn wanted(lock: &Lock, set: &RecipeSet, facts: &PythonFacts) -> Wanted {
    let env = facts.python.marker_environment();
    let dist_of = |component: &str| {
        set.get(component)
            .and_then(|r| r.dist_name())
            .map_or_else(|| normalize(component), |d| normalize(d.as_ref()))
    };
    let built = |source: &str| ["sha256:", "git:", "path:"].iter().any(|k| source.starts_with(k));
    // A prebuilt wheel the recipe offers is carried as its source (`sources/<sha256>`), not
    // fetched from an index; its dependencies are, as anyone's.
    let carried = |source: &str| built(source) || source.starts_with("wheel:");

    let stop: BTreeSet<String> = lock
        .components
        .iter()
        .filter(|c| c.source == NOT_BY_KILN)
        .map(|c| dist_of(&c.name))
        .collect();

    let roots: Vec<(String, BTreeSet<ExtraName>)> = lock
        .components
        .iter()
        .filter(|c| c.source != NOT_BY_KILN)
        .map(|c| {
            let extras = c
                .source
                .strip_prefix("index:")
                .and_then(|r| Requirement::<pep508_rs::VerbatimUrl>::from_str(r).ok())
                .map(|r| r.extras.into_iter().collect())
                .unwrap_or_default();
            (dist_of(&c.name), extras)
        })
        .collect();
    let walked = walk(facts, env.as_ref(), roots, &stop);
    let built_dists: BTreeSet<String> = lock
        .components
        .iter()
        .filter(|c| carried(&c.source))
        .map(|c| dist_of(&c.name))
        .collect();

    let mut out = Wanted {
        unmet: walked.unmet,
        ..Wanted::default()
    };
    for name in &walked.reached {
        if built_dists.contains(name) {
            continue;
        }
        if let Some(d) = facts.dists.get(name) {
            out.pinned.push(format!("{}=={}", d.name, d.version));
        }
    }
    for c in lock.components.iter().filter(|c| built(&c.source)) {
        if let Some(r) = set.get(&c.name)
            && !r.build.requires.is_empty()
        {
            out.build_requires.push((c.name.clone(), r.build.requires.clone()));
        }
    }
    out
}

struct Walked {
    reached: BTreeSet<String>,
    unmet: Vec<String>,
}

/// Every installed distribution `roots` need, roots included, not entering `stop`. A
/// distribution is visited again when it is asked for with an extra not seen before.
fn walk(
    facts: &PythonFacts,
    env: Option<&MarkerEnvironment>,
    roots: Vec<(String, BTreeSet<ExtraName>)>,
    stop: &BTreeSet<String>,
) -> Walked {
    let mut extras: BTreeMap<String, BTreeSet<ExtraName>> = BTreeMap::new();
    let mut reached = BTreeSet::new();
    let mut unmet = BTreeSet::new();
    let mut queue: VecDeque<(String, BTreeSet<ExtraName>)> = roots.into();
    while let Some((name, asked)) = queue.pop_front() {
        if stop.contains(&name) {
            continue;
        }
        let Some(dist) = facts.dists.get(&name) else {
            continue;
        };
        let seen = extras.entry(name.clone()).or_default();
        let new = !reached.contains(&name) || !asked.is_subset(seen);
        seen.extend(asked);
        if !new {
            continue;
        }
        reached.insert(name.clone());
        let active: Vec<ExtraName> = seen.iter().cloned().collect();
        for text in &dist.requires {
            let Ok(req) = Requirement::<pep508_rs::VerbatimUrl>::from_str(text) else {
                unmet.insert(format!("{}: cannot read `{text}`", dist.name));
                continue;
            };
            if env.is_some_and(|e| !req.evaluate_markers(e, &active)) {
                continue;
            }
            let dep = normalize(req.name.as_ref());
            if !facts.dists.contains_key(&dep) {
                if !stop.contains(&dep) {
                    unmet.insert(format!("{} requires {}, which is not installed", dist.name, req.name));
                }
                continue;
            }
            queue.push_back((dep, req.extras.into_iter().collect()));
        }
    }
    Walked {
        reached,
        unmet: unmet.into_iter().collect(),
    }
}

/// Why the wheelhouse could not be filled.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot fetch the wheels the bundle needs: {0}")]
    Download(#[from] CommandFailed),
    #[error("cannot fill {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Fetches what `wanted` names into `wheelhouse` with `python`'s pip (offline: only from what
/// `wheelhouse` already holds) and returns the file names of the wheels it needs, sorted.
pub fn fetch(
    python: &Path,
    wanted: &Wanted,
    wheelhouse: &Path,
    offline: bool,
    log: &Path,
) -> Result<Vec<String>, FetchError> {
    staged(wheelhouse, |staging| {
        let mut sets: Vec<(bool, &[String])> = Vec::new();
        if !wanted.pinned.is_empty() {
            sets.push((false, &wanted.pinned));
        }
        for (_, reqs) in &wanted.build_requires {
            sets.push((true, reqs));
        }
        for (deps, reqs) in sets {
            download(python, reqs, deps, staging, wheelhouse, offline).run_logged(log)?;
        }
        Ok(())
    })
}

/// Runs `fill` on a fresh staging directory beside `wheelhouse`, then moves what it fetched
/// into `wheelhouse` (a failed fetch leaves nothing half-written there); returns the wheels'
/// file names, sorted.
pub fn staged(
    wheelhouse: &Path,
    fill: impl FnOnce(&Path) -> Result<(), FetchError>,
) -> Result<Vec<String>, FetchError> {
    let io = |dir: &Path| {
        let dir = dir.to_path_buf();
        move |source| FetchError::Io { dir, source }
    };
    let staging = wheelhouse.with_file_name(format!("wheelhouse.part-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    std::fs::create_dir_all(wheelhouse).map_err(io(wheelhouse))?;
    let result = (|| {
        fill(&staging)?;
        let mut names = Vec::new();
        for e in std::fs::read_dir(&staging).map_err(io(&staging))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let dest = wheelhouse.join(&name);
            if !dest.exists() {
                std::fs::rename(e.path(), &dest).map_err(io(wheelhouse))?;
            }
            names.push(name);
        }
        names.sort();
        Ok(names)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// `pip download` of `reqs` into `dest`, wheels only; offline from `wheelhouse` alone.
fn download(python: &Path, reqs: &[String], deps: bool, dest: &Path, wheelhouse: &Path, offline: bool) -> Cmd {
    let mut c = Cmd::new(python.display().to_string()).args([
        "-m",
        "pip",
        "download",
        "--no-input",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--dest",
    ]);
    c = c.arg(dest.display().to_string());
    if !deps {
        c = c.arg("--no-deps");
    }
    offline_from(c, wheelhouse, offline).args(reqs.iter().cloned())
}

/// A `pip download` that, offline, takes wheels from `wheelhouse` alone.
pub(super) fn offline_from(c: Cmd, wheelhouse: &Path, offline: bool) -> Cmd {
    if offline {
        c.args(["--no-index", "--find-links"])
            .arg(wheelhouse.display().to_string())
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::python::Dist;

    fn dist(name: &str, version: &str, requires: &[&str]) -> (String, Dist) {
        (
            normalize(name),
            Dist {
                name: name.into(),
                version: version.into(),
                location: None,
                dist_info: None,
                direct_url: None,
                requires: requires.iter().map(|s| s.to_string()).collect(),
                installer: None,
                kiln: None,
                kiln_unreadable: None,
            },
        )
    }

    fn facts(dists: Vec<(String, Dist)>) -> PythonFacts {
        let mut f = PythonFacts::nothing_installed("/venv/bin/python", "3.12.3");
        for (k, v) in [
            ("implementation_name", "cpython"),
            ("implementation_version", "3.12.3"),
            ("os_name", "posix"),
            ("platform_machine", "x86_64"),
            ("platform_python_implementation", "CPython"),
            ("platform_release", "6.1"),
            ("platform_system", "Linux"),
            ("platform_version", "#1"),
            ("python_full_version", "3.12.3"),
            ("python_version", "3.12"),
            ("sys_platform", "linux"),
        ] {
            f.python.markers.insert(k.into(), v.into());
        }
        f.dists = dists.into_iter().collect();
        f
    }

    #[test]
    fn the_walk_follows_markers_and_extras_and_stops_at_what_the_target_brings() {
        // `tool` is what kiln installed; torch is the target's own.
        let f = facts(vec![
            dist("torch", "2.11.0", &["sympy>=1", "typing-extensions"]),
            dist("sympy", "1.14.0", &["mpmath"]),
            dist("mpmath", "1.3.0", &[]),
            dist("typing_extensions", "4.15.0", &[]),
            dist(
                "tool",
                "1.0",
                &[
                    "typing-extensions",
                    "torch",
                    "colorama; sys_platform == 'win32'",
                    "plugin[fast]",
                    "absent>=1",
                ],
            ),
            dist("plugin", "2.0", &["speedups; extra == 'fast'", "slow; extra == 'slow'"]),
            dist("speedups", "0.3", &[]),
            dist("slow", "9", &[]),
        ]);
        let stop = walk(
            &f,
            f.python.marker_environment().as_ref(),
            vec![("torch".into(), BTreeSet::new())],
            &BTreeSet::new(),
        )
        .reached;
        assert_eq!(
            stop.iter().map(String::as_str).collect::<Vec<_>>(),
            ["mpmath", "sympy", "torch", "typing-extensions"]
        );
        let w = walk(
            &f,
            f.python.marker_environment().as_ref(),
            vec![("tool".into(), BTreeSet::new())],
            &stop,
        );
        assert_eq!(
            w.reached.iter().map(String::as_str).collect::<Vec<_>>(),
            ["plugin", "speedups", "tool"],
            "typing-extensions is the target's (torch needs it); colorama is for Windows; `slow` only for an extra nobody asked for"
        );
        assert_eq!(w.unmet, ["tool requires absent, which is not installed"]);
    }
}
