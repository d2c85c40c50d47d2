//! The lockfile, `kiln.lock`: what a proven environment holds, so that another node (or the same
//! one later) can be given exactly that. `kiln lock` writes it from an environment in which every
//! component is `ok`; `kiln install --locked` reads it, pins every version and source to it, and
//! afterwards compares the environment with it field by field.
//!
//! For each component it records the installed version, the source identity kiln built it from
//! (`sha256:` of an sdist, `git:` commit, `path:`, `index:` requirement, `wheel:` sha256 of a
//! prebuilt wheel the recipe offers, with its URL in `wheel_url`; `installed` when kiln did not
//! install it), the wheel's sha256, the archs and CUDA toolkit it was built for and the
//! fingerprints of what it links against (torch's ABI facts). The environment section records
//! the interpreter, platform, target archs and toolkit. The declared build inputs it was built
//! with are recorded like its source (`git:` commit or `sha256:` of an archive, by input name),
//! and `--locked` pins them as it pins the source.
//!
//! It deliberately ignores the contents of `path` sources (a directory is recorded by name, not
//! by hash) and does not treat a different wheel hash after a rebuild as a failure: compiles are
//! not bit-for-bit reproducible, so that difference is reported as a note.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::probe::python::{Dist, PythonFacts};
use crate::recipe::diag::Diagnostic;
use crate::recipe::inputs::{Input, InputSource};
use crate::recipe::model::{Source, VersionEntry};
use crate::recipe::{Kind, RecipeSet};

mod check;
mod wheel;
pub use check::{is_git_rev, is_sha256};
pub use wheel::{WHEEL, offered_url};

/// The lockfile format this kiln writes and reads.
pub const FORMAT: u32 = 1;

const HEADER: &str = "# kiln.lock: written by `kiln lock`, reproduced by `kiln install --locked`.\n\
                      # Every field is a fact kiln proved when it was written; do not edit it by hand.\n";

const PLANNED_HEADER: &str = "# kiln.lock planned by `kiln bundle --for`: a plan for another node, nothing in it proven yet.\n\
                              # `kiln install --bundle` on that node installs it, proves it and writes the proven kiln.lock.\n";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub format: u32,
    pub environment: Environment,
    #[serde(rename = "component", default)]
    pub components: Vec<Locked>,
}

/// Where the locked components were proven.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// The interpreter's version (`3.12.3`).
    pub python: String,
    /// `sys_platform` and `platform_machine` (`linux x86_64`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// The target GPU archs (`12.0`).
    pub archs: Vec<Arch>,
    /// The CUDA toolkit's version, when one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// Set in a lock that `kiln bundle --for` planned for another node (that node's name):
    /// nothing in it is proven yet. `kiln install --bundle` there installs it, runs every
    /// proof and writes the proven `kiln.lock`; until then only each component's version,
    /// source and features are known, so only those are compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_for: Option<String>,
}

/// One component as it was installed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    pub name: String,
    /// The installed version, local label included (`2.14.1+cu130`).
    pub version: String,
    /// The features it was built with (`cutedsl`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// What it was built or installed from: `sha256:<hex>`, `git:<commit>`, `path:<dir>`,
    /// `index:<requirement>`, `wheel:<hex>` (a prebuilt wheel, installed as it is), or
    /// `installed` (kiln did not install it).
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wheel_sha256: Option<String>,
    /// For a `wheel:` source: where that wheel is (the recipe's URL when it was locked), so
    /// that the lock reproduces it even where the recipe no longer offers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wheel_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archs: Vec<Arch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// Fingerprints of the components it links against (`abi = true`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub built_against: BTreeMap<String, String>,
    /// The declared build inputs it was built with, by name: `git:<commit>` or `sha256:<hex>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
}

/// The source identity recorded for components kiln did not install.
pub const NOT_BY_KILN: &str = "installed";

impl Locked {
    /// What a lock records for component `name` installed as `dist`.
    pub fn of(name: &str, dist: &Dist) -> Locked {
        match &dist.kiln {
            Some(rec) => Locked {
                name: name.to_string(),
                version: dist.version.clone(),
                features: rec.features.clone(),
                source: wheel::identity(&rec.source, rec.wheel_sha256.as_deref()),
                wheel_sha256: rec.wheel_sha256.clone(),
                wheel_url: None,
                archs: rec.archs.clone(),
                cuda: rec.cuda.clone(),
                built_against: rec.built_against.clone(),
                inputs: rec.inputs.clone(),
            },
            None => Locked {
                name: name.to_string(),
                version: dist.version.clone(),
                features: Vec::new(),
                source: NOT_BY_KILN.to_string(),
                wheel_sha256: None,
                wheel_url: None,
                archs: Vec::new(),
                cuda: None,
                built_against: BTreeMap::new(),
                inputs: BTreeMap::new(),
            },
        }
    }

    /// `name[features]==version`: the target that reproduces it.
    pub fn target(&self) -> String {
        if self.features.is_empty() {
            format!("{}=={}", self.name, self.public_version())
        } else {
            format!("{}[{}]=={}", self.name, self.features.join(","), self.public_version())
        }
    }

    /// The version without its local label, as the solver and recipes spell it.
    pub fn public_version(&self) -> &str {
        self.version.split('+').next().unwrap_or(&self.version)
    }
}

impl Environment {
    pub fn of(py: &PythonFacts, archs: &[Arch], cuda: Option<String>) -> Environment {
        let m = &py.python.markers;
        let platform = match (m.get("sys_platform"), m.get("platform_machine")) {
            (Some(s), Some(a)) => Some(format!("{s} {a}")),
            _ => None,
        };
        Environment {
            python: py.python.version.clone(),
            platform,
            archs: archs.to_vec(),
            cuda,
            planned_for: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
    #[error("{0}")]
    State(Box<crate::state::StateError>),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// Reads and checks a lockfile; a malformed one is a diagnostic at its `file:line:col`.
pub fn read(path: &Path) -> Result<Lock, LockError> {
    // Regular files only, at most 16 MiB ([`crate::state`]): a fifo must not hang kiln, nor a
    // sparse 2 GiB file cost gigabytes of memory.
    let fix = "give `--lock` a lockfile `kiln lock` wrote";
    let bytes = crate::state::read(path, crate::state::LOCK_LIMIT, fix)
        .map_err(|e| LockError::State(Box::new(e)))?
        .ok_or_else(|| LockError::Read {
            path: path.to_path_buf(),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        LockError::State(Box::new(crate::state::StateError::Shape {
            path: path.to_path_buf(),
            detail: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
            fix: fix.to_string(),
        }))
    })?;
    parse(&path.display().to_string(), &text)
}

/// Parses lockfile text (`file` names it in diagnostics).
pub fn parse(file: &str, text: &str) -> Result<Lock, LockError> {
    let lock: Lock = toml::from_str(text).map_err(|e| {
        LockError::Invalid(Box::new(Diagnostic::new(
            file,
            text,
            e.span(),
            e.message().trim_end().to_string(),
            format!("write it again with `kiln lock`; kiln reads format {FORMAT}"),
        )))
    })?;
    if lock.format != FORMAT {
        let at = text.find("format").map(|i| i..i + "format".len());
        return Err(LockError::Invalid(Box::new(Diagnostic::new(
            file,
            text,
            at,
            format!("lockfile format {} is not one this kiln reads", lock.format),
            format!("this kiln reads format {FORMAT}; write it again with `kiln lock`"),
        ))));
    }
    // Values become cache paths and git arguments: each must have its one shape.
    if let Some(bad) = check::check(text).into_iter().next() {
        return Err(LockError::Invalid(Box::new(Diagnostic::new(
            file,
            text,
            Some(bad.span),
            bad.message,
            bad.help,
        ))));
    }
    let mut seen = std::collections::BTreeSet::new();
    for c in &lock.components {
        if !seen.insert(c.name.as_str()) {
            let at = text
                .match_indices(&format!("\"{}\"", c.name))
                .nth(1)
                .map(|(i, s)| i..i + s.len());
            return Err(LockError::Invalid(Box::new(Diagnostic::new(
                file,
                text,
                at,
                format!("`{}` is locked twice", c.name),
                "keep one entry, or write the lock again with `kiln lock`",
            ))));
        }
    }
    Ok(lock)
}

/// The lockfile's text: a header, then TOML.
pub fn render(lock: &Lock) -> String {
    let body = toml::to_string(lock).unwrap_or_else(|e| format!("# cannot render: {e}\n"));
    let header = if lock.environment.planned_for.is_some() {
        PLANNED_HEADER
    } else {
        HEADER
    };
    // A URL the lock names (`wheel_url`) never carries its credential into the file.
    format!("{header}{}", crate::process::secrets::mask_urls(&body))
}

/// Writes the lockfile whole or not at all (a temporary file renamed over it).
pub fn write(path: &Path, lock: &Lock) -> Result<(), LockError> {
    let err = |source| LockError::Write {
        path: path.to_path_buf(),
        source,
    };
    crate::store::atomic::write(path, render(lock).as_bytes(), crate::store::atomic::Sync::Durable).map_err(err)
}

/// One field in which the environment differs from the lock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub component: String,
    pub field: &'static str,
    pub locked: String,
    pub found: String,
    /// Reported, but not a failure to reproduce (a rebuilt wheel's hash).
    pub note_only: bool,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: the lock has {}, the environment has {}",
            self.component, self.field, self.locked, self.found
        )
    }
}

/// Every field in which `found` (what is installed now, by component) differs from the lock;
/// with `targeted` (the install targeted other archs than the lock's on purpose, `--arch`) a
/// component built for exactly those archs differs in its archs only as a note.
pub fn differences(lock: &Lock, found: &BTreeMap<String, Locked>, targeted: Option<&[Arch]>) -> Vec<Difference> {
    let mut out = Vec::new();
    fn text<T: ToString>(v: &[T]) -> String {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
        }
    }
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".to_string());
    for want in &lock.components {
        let mut diff = |field: &'static str, locked: String, found: String, note_only: bool| {
            if locked != found {
                out.push(Difference {
                    component: want.name.clone(),
                    field,
                    locked,
                    found,
                    note_only,
                });
            }
        };
        let Some(have) = found.get(&want.name) else {
            diff("version", want.version.clone(), "nothing installed".into(), false);
            continue;
        };
        diff("version", want.version.clone(), have.version.clone(), false);
        // A prebuilt wheel as an earlier kiln recorded it is the same source as `wheel:`.
        let source = |l: &Locked| wheel::identity(&l.source, l.wheel_sha256.as_deref());
        diff("source", source(want), source(have), false);
        diff("features", text(&want.features), text(&have.features), false);
        // A planned lock knows no more than these: the rest is what the node proves.
        if lock.environment.planned_for.is_some() {
            continue;
        }
        let as_targeted = targeted.is_some_and(|t| text(t) == text(&have.archs));
        diff("archs", text(&want.archs), text(&have.archs), as_targeted);
        diff("cuda", opt(&want.cuda), opt(&have.cuda), false);
        let against =
            |m: &BTreeMap<String, String>| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join("; ");
        diff(
            "built against",
            against(&want.built_against),
            against(&have.built_against),
            false,
        );
        diff("build inputs", against(&want.inputs), against(&have.inputs), false);
        // Only a wheel both sides know can differ; a rebuild is not bit-for-bit identical.
        if let (Some(w), Some(h)) = (&want.wheel_sha256, &have.wheel_sha256) {
            diff("wheel sha256", w.clone(), h.clone(), true);
        }
    }
    out
}

/// Pins the recipes to the lock: each git source of a locked version is checked out at the
/// locked commit; an sdist must still have the locked sha256. Returns what cannot be pinned
/// (the recipe changed under the lock), one line each.
pub fn pin_sources(set: &mut RecipeSet, lock: &Lock) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    for c in &lock.components {
        let Some(r) = set.recipes.get_mut(&c.name) else {
            problems.push(format!("{} is locked, but no recipe describes it", c.name));
            continue;
        };
        if r.kind != Kind::Python {
            continue;
        }
        let Ok(v) = c.public_version().parse::<pep440_rs::Version>() else {
            problems.push(format!("{}: `{}` is not a version", c.name, c.version));
            continue;
        };
        let recipe_source = r.source.clone();
        let recipe_inputs = r.build.inputs.clone();
        let entry = r.versions.iter_mut().find(|e| e.version == v);
        if let Some(sha) = wheel::locked_wheel(c) {
            // Installed as a prebuilt wheel: the locked version offers that wheel alone.
            match entry {
                Some(entry) => wheel::pin(entry, c, sha, &mut problems),
                None => problems.push(format!(
                    "{} {} is locked as the prebuilt wheel sha256 {sha}, but its recipe no longer describes that version",
                    c.name,
                    c.public_version()
                )),
            }
            continue;
        }
        let Some(entry) = entry else {
            let known: Vec<String> = r.versions.iter().map(|e| e.version.to_string()).collect();
            if c.source != NOT_BY_KILN {
                problems.push(format!(
                    "{} {} is locked, but its recipe no longer describes that version (it has {})",
                    c.name,
                    c.public_version(),
                    known.join(", ")
                ));
            }
            continue;
        };
        pin_inputs(&recipe_inputs, entry, c, &mut problems);
        // A version without a source of its own builds from the recipe's: pin a copy of it.
        if entry.source.is_none() {
            entry.source = recipe_source;
        }
        let Some(source) = entry.source.as_mut() else { continue };
        let (kind, value) = c.source.split_once(':').unwrap_or((c.source.as_str(), ""));
        match (kind, source) {
            ("git", Source::Git { rev, .. }) => *rev = value.to_string(),
            ("sha256", Source::Sdist { sha256, url }) if sha256 != value => problems.push(format!(
                "{} {}: the lock has the sdist with sha256 {value}; the recipe now names {url} with sha256 {sha256}",
                c.name,
                c.public_version()
            )),
            ("sha256", Source::Sdist { .. }) | ("path", Source::Path { .. }) | ("index", Source::Wheel { .. }) => {}
            (_, _) if c.source == NOT_BY_KILN => {}
            (_, s) => problems.push(format!(
                "{} {}: the lock says it came from `{}`, but the recipe's source is now {}",
                c.name,
                c.public_version(),
                c.source,
                source_kind(s)
            )),
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// Pins the build inputs of the locked version to the lock's: a git input is checked out at the
/// locked commit (a copy of a recipe-wide input becomes the version's own); an archive must
/// still have the locked sha256; an input the recipe no longer declares is a problem.
fn pin_inputs(recipe_inputs: &[Input], entry: &mut VersionEntry, c: &Locked, problems: &mut Vec<String>) {
    for (name, identity) in &c.inputs {
        let own = entry.inputs.iter().position(|i| &i.name == name);
        let input = match own {
            Some(at) => &mut entry.inputs[at],
            None => match recipe_inputs.iter().find(|i| &i.name == name) {
                Some(i) => {
                    entry.inputs.push(i.clone());
                    entry.inputs.last_mut().expect("just pushed")
                }
                None => {
                    problems.push(format!(
                        "{} {}: the lock has build input `{name}`, which the recipe no longer declares",
                        c.name,
                        c.public_version()
                    ));
                    continue;
                }
            },
        };
        match (identity.split_once(':'), &mut input.from) {
            (Some(("git", commit)), InputSource::Git { rev, .. }) => *rev = Some(commit.to_string()),
            (Some(("sha256", want)), InputSource::Archive { sha256, archive }) if sha256 != want => {
                problems.push(format!(
                    "{} {}: the lock has build input `{name}` with sha256 {want}; the recipe now names {archive} with sha256 {sha256}",
                    c.name,
                    c.public_version()
                ))
            }
            (Some(("sha256", _)), InputSource::Archive { .. }) => {}
            (Some(("sha256", want)), InputSource::Wheel { sha256, wheel, .. }) if sha256 != want => {
                problems.push(format!(
                    "{} {}: the lock has build input `{name}` with sha256 {want}; the recipe now names {wheel} with sha256 {sha256}",
                    c.name,
                    c.public_version()
                ))
            }
            (Some(("sha256", _)), InputSource::Wheel { .. }) => {}
            _ => problems.push(format!(
                "{} {}: the lock says build input `{name}` was `{identity}`, but the recipe declares it otherwise",
                c.name,
                c.public_version()
            )),
        }
    }
}

fn source_kind(s: &Source) -> &'static str {
    match s {
        Source::Sdist { .. } => "an sdist",
        Source::Git { .. } => "a git repository",
        Source::Path { .. } => "a local directory",
        Source::Wheel { .. } => "a wheel from an index",
    }
}

#[cfg(test)]
mod tests;
