//! The wheelhouse of a bundle planned for another node (`kiln bundle --for FILE`): the
//! third-party wheels that installing the planned lock there needs and the node lacks, for the
//! node's interpreter and platform, not this host's.
//!
//! - The runtime dependencies are resolved by `uv pip compile` for the node's Python version and
//!   platform (`--python-version`, `--python-platform`, wheels only): the planned components
//!   (prebuilt wheels by their cached file, index wheels by their requirement) as requirements,
//!   what the lock says the node keeps pinned as constraints, and every distribution the node
//!   has as a preference (uv keeps the versions an existing output file names), so the answer
//!   changes on the node only what must change. What the node already has at the version
//!   resolved is left out; the planned prebuilt wheels travel as sources.
//! - Each component built from source needs its recipe's `[build] requires`, resolved alone
//!   and carried whole: the node installs them into a private directory.
//! - Each wheel is fetched by `pip download --no-deps` with the node's tags
//!   (`--python-version`, `--implementation`, `--abi`, `--platform`), into the cache's
//!   `wheelhouse/`.
//!
//! It deliberately ignores the runtime dependencies of components built from source (their
//! sdist must be built to know them: the node resolves them from the wheelhouse of the
//! components that need the same), and dependencies that exist only as sdists (uv refuses them
//! by name, and no bundle is written).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use pep440_rs::Version;

use super::wheelhouse::{FetchError, Wanted};
use crate::lock::{Lock, NOT_BY_KILN};
use crate::probe::python::{PythonFacts, normalize};
use crate::process::{Cmd, CommandFailed};
use crate::recipe::RecipeSet;

/// The node's interpreter and platform, as `pip download` and `uv pip compile` are told them.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTarget {
    /// `3.12.3`.
    pub python: String,
    /// `cp`.
    pub implementation: String,
    /// `cp312`, `abi3`, `none`: each ABI its tags accept.
    pub abis: Vec<String>,
    /// `manylinux_2_35_x86_64`, ..., `linux_x86_64`: each platform its tags accept.
    pub platforms: Vec<String>,
    /// uv's target triple for that platform (`x86_64-manylinux_2_35`).
    pub triple: String,
}

impl NodeTarget {
    /// From the node's interpreter version and its supported wheel tags (best first).
    pub fn of(python: &str, tags: &[String]) -> Result<NodeTarget, String> {
        let mut implementation = None;
        let (mut abis, mut platforms) = (Vec::new(), Vec::new());
        for t in tags {
            let mut parts = t.split('-');
            let (Some(interp), Some(abi), Some(platform)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            if implementation.is_none() && interp.len() > 2 && !interp.starts_with("py") {
                implementation = Some(interp[..2].to_string());
            }
            if !abis.contains(&abi.to_string()) {
                abis.push(abi.to_string());
            }
            if platform != "any" && !platforms.contains(&platform.to_string()) {
                platforms.push(platform.to_string());
            }
        }
        let implementation = implementation.ok_or("its wheel tags name no interpreter (cp312-...)")?;
        let triple = triple(&platforms).ok_or_else(|| {
            format!(
                "its platform ({}) is not one uv resolves for",
                platforms.first().map_or("none", String::as_str)
            )
        })?;
        Ok(NodeTarget {
            python: python.to_string(),
            implementation,
            abis,
            platforms,
            triple,
        })
    }

    fn minor(&self) -> String {
        self.python.splitn(3, '.').take(2).collect::<Vec<_>>().join(".")
    }
}

/// uv's `--python-platform` for the best platform tag: `manylinux_2_N_ARCH` → `ARCH-manylinux_2_N`
/// (uv knows glibc 2.17 to 2.40), `linux_ARCH` → `ARCH-unknown-linux-gnu`.
fn triple(platforms: &[String]) -> Option<String> {
    let glibc = platforms.iter().find_map(|p| {
        let rest = p.strip_prefix("manylinux_2_")?;
        let (minor, arch) = rest.split_once('_')?;
        Some((minor.parse::<u32>().ok()?, arch.to_string()))
    });
    match glibc {
        Some((minor, arch)) => Some(format!("{arch}-manylinux_2_{}", minor.clamp(17, 40))),
        None => platforms
            .iter()
            .find_map(|p| p.strip_prefix("linux_"))
            .map(|arch| format!("{arch}-unknown-linux-gnu")),
    }
}

/// Why the node's wheelhouse could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NodeWheelsError {
    #[error("cannot write in {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot resolve the runtime dependencies for the node: {0}")]
    Resolve(CommandFailed),
}

/// How the resolution runs here: kiln's uv, kiln's cache (the planned prebuilt wheels are in
/// `sources/<sha256>/`), a scratch directory for uv's files, offline or not, and the log.
pub struct Run<'a> {
    pub uv: &'a Path,
    pub cache: &'a Path,
    pub work: &'a Path,
    pub offline: bool,
    pub log: &'a Path,
}

/// What the node needs: `facts` is its interpreter.
pub fn resolve(
    run: &Run,
    lock: &Lock,
    set: &RecipeSet,
    facts: &PythonFacts,
    target: &NodeTarget,
) -> Result<Wanted, NodeWheelsError> {
    let io = |dir: &Path| {
        let dir = dir.to_path_buf();
        move |source| NodeWheelsError::Io { dir, source }
    };
    let (uv, cache, work, offline, log) = (run.uv, run.cache, run.work, run.offline, run.log);
    std::fs::create_dir_all(work).map_err(io(work))?;
    let dist_of = |name: &str| {
        set.get(name)
            .and_then(|r| r.dist_name())
            .map_or_else(|| normalize(name), |d| normalize(d.as_ref()))
    };
    let public = |v: &str| v.split('+').next().unwrap_or(v).to_string();
    let (mut requirements, mut constraints, mut carried) = (Vec::new(), Vec::new(), BTreeSet::new());
    for c in &lock.components {
        let dist = dist_of(&c.name);
        // What the recipe knows this version's metadata leaves too open.
        if let Some(e) = set
            .get(&c.name)
            .and_then(|r| r.version_entry(&c.public_version().parse().ok()?))
        {
            constraints.extend(e.constraints.iter().cloned());
        }
        if c.source == NOT_BY_KILN {
            constraints.push(format!("{dist}=={}", public(&c.version)));
        } else if let Some(sha) = c.source.strip_prefix("wheel:") {
            let dir = cache.join("sources").join(sha);
            let file = std::fs::read_dir(&dir)
                .map_err(io(&dir))?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
                .ok_or_else(|| NodeWheelsError::Io {
                    dir: dir.clone(),
                    source: std::io::Error::other(format!("the prebuilt wheel of {} is not there", c.name)),
                })?;
            // A feature is a component of its own (`[features.*] depends`), not an extra.
            requirements.push(format!("{dist} @ file://{}", file.display()));
            carried.insert(dist);
        } else if let Some(req) = c.source.strip_prefix("index:") {
            requirements.push(req.to_string());
        }
    }
    let mut out = Wanted::default();
    if !requirements.is_empty() {
        let pins = compile(uv, &requirements, &constraints, facts, target, work, offline, log)?;
        for (name, version) in pins {
            let has = facts
                .dists
                .get(&name)
                .is_some_and(|d| same_version(&public(&d.version), &version));
            if !has && !carried.contains(&name) {
                out.pinned.push(format!("{name}=={version}"));
            }
        }
    }
    for c in lock
        .components
        .iter()
        .filter(|c| ["sha256:", "git:"].iter().any(|k| c.source.starts_with(k)))
    {
        if let Some(r) = set.get(&c.name)
            && !r.build.requires.is_empty()
        {
            let dir = work.join(format!("build-{}", c.name));
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            let pins = compile(uv, &r.build.requires, &[], facts, target, &dir, offline, log)?;
            let reqs = pins.into_iter().map(|(n, v)| format!("{n}=={v}")).collect();
            out.build_requires.push((c.name.clone(), reqs));
        }
    }
    Ok(out)
}

fn same_version(a: &str, b: &str) -> bool {
    match (Version::from_str(a), Version::from_str(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// `uv pip compile` of `requirements` within `constraints` for the node, preferring the
/// versions it has; returns each pinned distribution (normalized) and version.
#[allow(clippy::too_many_arguments)]
fn compile(
    uv: &Path,
    requirements: &[String],
    constraints: &[String],
    facts: &PythonFacts,
    target: &NodeTarget,
    work: &Path,
    offline: bool,
    log: &Path,
) -> Result<Vec<(String, String)>, NodeWheelsError> {
    let io = |source| NodeWheelsError::Io {
        dir: work.to_path_buf(),
        source,
    };
    let (input, cons, output) = (work.join("in.txt"), work.join("constraints.txt"), work.join("out.txt"));
    std::fs::write(&input, requirements.join("\n") + "\n").map_err(io)?;
    std::fs::write(&cons, constraints.join("\n") + "\n").map_err(io)?;
    // uv keeps the versions the output file already names where they fit: the node's own.
    let prefer: BTreeMap<&str, String> = facts
        .dists
        .values()
        .map(|d| {
            (
                d.name.as_str(),
                d.version.split('+').next().unwrap_or(&d.version).to_string(),
            )
        })
        .collect();
    let prefer: String = prefer.iter().map(|(n, v)| format!("{n}=={v}\n")).collect();
    std::fs::write(&output, prefer).map_err(io)?;
    let mut c = crate::apply::install::uv_cmd(uv)
        .args([
            "pip",
            "compile",
            "--quiet",
            "--no-header",
            "--no-annotate",
            "--only-binary",
            ":all:",
        ])
        .args([
            "--python-version",
            target.python.as_str(),
            "--python-platform",
            target.triple.as_str(),
        ])
        .arg("--constraint")
        .arg(cons.display().to_string())
        .arg("--output-file")
        .arg(output.display().to_string());
    if offline {
        c = c.arg("--offline");
    }
    c.arg(input.display().to_string())
        .run_logged(log)
        .map_err(NodeWheelsError::Resolve)?;
    let text = std::fs::read_to_string(&output).map_err(io)?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains(" @ "))
        .filter_map(|l| {
            let (name, version) = l.split_once("==")?;
            let name = name.split('[').next().unwrap_or(name);
            Some((normalize(name.trim()), version.split(';').next()?.trim().to_string()))
        })
        .collect())
}

/// `pip download --no-deps` of each pinned wheel for the node's tags into `wheelhouse`
/// (staged: a failed fetch leaves nothing half-written there). Returns the wheel files' names.
pub fn fetch(
    python: &Path,
    wanted: &Wanted,
    target: &NodeTarget,
    wheelhouse: &Path,
    offline: bool,
    log: &Path,
) -> Result<Vec<String>, FetchError> {
    let all: Vec<String> = wanted
        .pinned
        .iter()
        .chain(wanted.build_requires.iter().flat_map(|(_, r)| r))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    super::wheelhouse::staged(wheelhouse, |staging| {
        if !all.is_empty() {
            download(python, &all, target, staging, wheelhouse, offline).run_logged(log)?;
        }
        Ok(())
    })
}

fn download(python: &Path, reqs: &[String], t: &NodeTarget, dest: &Path, wheelhouse: &Path, offline: bool) -> Cmd {
    let mut c = Cmd::new(python.display().to_string())
        .args(["-m", "pip", "download", "--no-input", "--disable-pip-version-check"])
        .args(["--no-deps", "--only-binary=:all:", "--python-version"])
        .arg(t.minor())
        .arg("--implementation")
        .arg(t.implementation.as_str());
    for a in &t.abis {
        c = c.arg("--abi").arg(a.as_str());
    }
    for p in &t.platforms {
        c = c.arg("--platform").arg(p.as_str());
    }
    c = c.arg("--dest").arg(dest.display().to_string());
    super::wheelhouse::offline_from(c, wheelhouse, offline).args(reqs.iter().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_read_off_the_nodes_tags() {
        let tags: Vec<String> = [
            "cp312-cp312-manylinux_2_35_x86_64",
            "cp312-cp312-manylinux_2_17_x86_64",
            "cp312-cp312-linux_x86_64",
            "cp312-abi3-manylinux_2_35_x86_64",
            "cp312-none-linux_x86_64",
            "py3-none-any",
        ]
        .map(String::from)
        .to_vec();
        let t = NodeTarget::of("3.12.3", &tags).unwrap();
        assert_eq!(t.implementation, "cp");
        assert_eq!(t.abis, ["cp312", "abi3", "none"]);
        assert_eq!(
            t.platforms,
            ["manylinux_2_35_x86_64", "manylinux_2_17_x86_64", "linux_x86_64"]
        );
        assert_eq!(t.triple, "x86_64-manylinux_2_35");
        assert_eq!(t.minor(), "3.12");
        assert_eq!(
            triple(&["manylinux_2_41_aarch64".into()]).as_deref(),
            Some("aarch64-manylinux_2_40"),
            "uv knows glibc up to 2.40"
        );
        assert_eq!(
            triple(&["linux_x86_64".into()]).as_deref(),
            Some("x86_64-unknown-linux-gnu")
        );
        assert!(NodeTarget::of("3.12.3", &["py3-none-any".into()]).is_err());
    }
}
