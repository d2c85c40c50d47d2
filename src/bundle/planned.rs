//! A lock planned for another node (`kiln bundle --for FILE`): each Python component of the
//! plan with the version, features and source that node is to install (`wheel:` and its URL for
//! a prebuilt wheel the plan took, `index:` for an index wheel, `sha256:` or `git:` for a
//! build), and what the node keeps as it records it (`installed`, or the source an earlier kiln
//! installed it from). Its `[environment]` is the node's interpreter, platform and toolkit with
//! the plan's archs, and names the node in `planned_for`.
//!
//! It deliberately records nothing only the node can prove (the archs a build was made for, a
//! built wheel's hash, ABI fingerprints): `kiln install --bundle` there compares versions,
//! sources and features, runs every proof and writes the proven lock.

use crate::arch::Arch;
use crate::lock::{self, Environment, Lock, Locked};
use crate::probe::python::{PythonFacts, normalize};
use crate::recipe::{Kind, RecipeSet, Source};
use std::path::Path;

use crate::apply::{inputs, prebuilt, source};
use crate::resolve::Plan;

/// The lock `plan` makes for the node whose interpreter is `facts` (`host` names it), or each
/// component it cannot record, with why.
pub fn lock(
    plan: &Plan,
    set: &RecipeSet,
    facts: &PythonFacts,
    archs: &[Arch],
    cuda: Option<String>,
    host: &str,
) -> Result<Lock, Vec<String>> {
    let mut components = Vec::new();
    let mut problems = Vec::new();
    for step in &plan.steps {
        let Some(r) = set.get(&step.name).filter(|r| r.kind == Kind::Python) else {
            continue;
        };
        let dist = r
            .dist_name()
            .map_or_else(|| normalize(&r.name), |d| normalize(d.as_ref()));
        if !step.action.changes() {
            // What the node has stays as it has it; what it lacks and the plan leaves out
            // (an optional component) is not in the lock.
            if let Some(d) = facts.dists.get(&dist) {
                components.push(Locked::of(&r.name, d));
            }
            continue;
        }
        let Some(version) = step.version.clone() else {
            problems.push(format!("{}: the plan names no version for it", r.name));
            continue;
        };
        let mut wheel_url = None;
        let source = match step
            .prebuilt
            .as_ref()
            .filter(|d| d.install)
            .and_then(|d| d.wheel.as_ref())
        {
            Some(w) => {
                wheel_url = Some(w.url.clone());
                format!("{}:{}", lock::WHEEL, w.sha256)
            }
            None => match r.source_of(Some(&version)) {
                Some(Source::Wheel { requirement, .. }) => format!("index:{requirement}"),
                Some(Source::Sdist { sha256, .. }) => format!("sha256:{sha256}"),
                Some(Source::Git { rev, .. }) if lock::is_git_rev(rev) => format!("git:{rev}"),
                Some(Source::Git { url, rev, .. }) => {
                    problems.push(format!(
                        "{} {version}: its source is {url} at `{rev}`, not a commit; a planned lock pins a commit: give the recipe's `rev` as the 40-digit commit `{rev}` names",
                        r.name
                    ));
                    continue;
                }
                Some(Source::Path { path }) => {
                    problems.push(format!(
                        "{} {version}: its source is the local directory {}, which another node does not have",
                        r.name,
                        path.display()
                    ));
                    continue;
                }
                None => {
                    problems.push(format!("{} {version}: the recipe has no source for it", r.name));
                    continue;
                }
            },
        };
        components.push(Locked {
            name: r.name.clone(),
            version,
            features: step.features.clone(),
            source,
            wheel_sha256: None,
            wheel_url,
            archs: Vec::new(),
            cuda: None,
            built_against: Default::default(),
            inputs: Default::default(),
        });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    components.sort_by(|a, b| a.name.cmp(&b.name));
    let mut environment = Environment::of(facts, archs, cuda);
    environment.planned_for = Some(host.to_string());
    Ok(Lock {
        format: lock::FORMAT,
        environment,
        components,
    })
}

/// Brings into `cache` what the node will install from: each planned prebuilt wheel and sdist
/// (checked against its sha256), each git source's mirror, and the declared build inputs of
/// what it builds (recorded in the lock's `inputs`, as a build records them). Returns each
/// that could not be had, with why.
pub fn fetch_sources(
    lock: &mut Lock,
    set: &RecipeSet,
    cache: &Path,
    offline: bool,
    log: &Path,
    watch: &crate::watch::Watch,
) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    for c in &mut lock.components {
        let Some(r) = set.get(&c.name) else { continue };
        let what = format!("{} {}", c.name, c.version);
        let source = r.source_of(Some(c.public_version()));
        let got = match (c.source.split_once(':'), source) {
            (Some(("wheel", sha)), _) => match &c.wheel_url {
                Some(url) => watch
                    .download_waiting(&c.name, file_name(url), |p, waiting| {
                        prebuilt::fetch(url, sha, cache, offline, source::Told { bytes: p, waiting })
                    })
                    .map(|_| ()),
                None => Ok(()),
            },
            (Some(("sha256", sha)), Some(Source::Sdist { url, .. })) => watch
                .download_waiting(&c.name, file_name(url), |p, waiting| {
                    source::cached_download(url, sha, cache, offline, source::Told { bytes: p, waiting })
                })
                .map(|_| ()),
            (Some(("git", _)), Some(Source::Git { url, .. })) => {
                source::git::git_mirror(url, cache, offline, log).map(|_| ())
            }
            _ => Ok(()),
        };
        if let Err(e) = got {
            problems.push(format!("{what}: {e}"));
            continue;
        }
        let built = c.source.starts_with("sha256:") || c.source.starts_with("git:");
        let declared = r.build_of(c.public_version().parse().ok().as_ref()).inputs.clone();
        if !built || declared.is_empty() {
            continue;
        }
        let work = cache
            .join("work")
            .join(format!("bundle-inputs-{}-{}", c.name, std::process::id()));
        match watch.download_waiting(&c.name, "build inputs", |p, waiting| {
            inputs::fetch(
                &declared,
                &work,
                cache,
                offline,
                log,
                source::Told { bytes: p, waiting },
            )
        }) {
            Ok(fetched) => c.inputs = fetched.into_iter().map(|f| (f.name, f.identity)).collect(),
            Err(e) => problems.push(format!("{what}: its build inputs: {e}")),
        }
        let _ = std::fs::remove_dir_all(&work);
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// The file name at the end of `url`.
fn file_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}
