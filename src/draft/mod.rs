//! `kiln recipe draft`: a `[[versions]]` entry for one release, read from the release's own
//! artifacts for a person to review — the sdist's URL and sha256, Requires-Python, the pins of
//! its metadata that name kiln components (as `depends`), its Linux wheels with their sha256,
//! and the build inputs its CMake files download (`FetchContent`, as `inputs`) — each with
//! where it came from, and how it differs from the recipe's entry for that version.
//!
//! It owns gathering and comparing those facts. It never writes a recipe, and it ignores what
//! only a person can decide: which pins a source build relaxes (a wheel pins torch exactly; a
//! recipe that builds against the torch present says a range), which inputs an arch needs, and
//! the prose of `why`. Per-binary arch verdicts of the wheels are `kiln plan`'s.

pub mod cmake;
mod compare;
pub mod pypi;
pub mod ranged;
mod sdist;

use std::path::Path;

use serde::Serialize;

use crate::recipe::RecipeSet;

/// A fact and where it came from (a URL, or a file:line of the sdist).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fact {
    pub value: String,
    pub from: String,
}

/// A file of the release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    pub file: String,
    pub url: String,
    pub sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A pin of the release's metadata on a kiln component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    pub component: String,
    /// As the metadata writes it (`torch==2.14.0`).
    pub requirement: String,
    /// The version specifiers alone (`==2.14.0`).
    pub spec: String,
}

/// A downloaded build input, shaped as a recipe's `[[versions.inputs]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DraftInput {
    /// The FetchContent name with `_` as `-` (recipe input names are kebab-case).
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
    /// A 40-hex `GIT_TAG`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// Any other `GIT_TAG` (a tag or branch name: the recipe needs its commit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// The submodules checked out: `None` for every one (FetchContent's default).
    pub submodules: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdir: Option<String>,
    /// The variable that points the build at kiln's copy: the project's own `*_SRC_DIR`, else
    /// FetchContent's `FETCHCONTENT_SOURCE_DIR_<NAME>` (which applies to `FetchContent_Declare`).
    pub env: String,
    /// Where each fact came from: the call, the repository, the tag, the override.
    pub why: String,
}

/// An extension module `setup.py` declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Extension {
    pub module: String,
    /// `optional=True`: the build goes on without it.
    pub optional: bool,
    pub at: String,
}

/// One field where the draft and the recipe's entry differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub field: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipe: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<String>,
}

/// The draft of one release.
#[derive(Debug, Clone, Serialize)]
pub struct Draft {
    pub component: String,
    pub dist: String,
    pub version: String,
    /// The index's project page it was read from.
    pub index: String,
    /// Where Requires-Dist and Requires-Python were read (a wheel's core metadata, or the
    /// sdist's PKG-INFO).
    pub metadata_from: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<Fact>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sdist: Option<Artifact>,
    pub wheels: Vec<Artifact>,
    pub depends: Vec<Pin>,
    /// For a recipe whose versions install from the index (`wheel = "torch==2.14.1"`): the
    /// requirement a version entry names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel_requirement: Option<String>,
    /// The CUDA runtime the wheels are built for, from their pin on NVIDIA's `cuda-toolkit` or
    /// `nvidia-cuda-runtime` wheels (as `runtime_cuda`, major.minor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_cuda: Option<Fact>,
    pub inputs: Vec<DraftInput>,
    /// The extension modules `setup.py` declares (`Extension(name=...)`, `CMakeExtension(...)`),
    /// every branch's (CUDA, ROCm, CPU): the candidates for `imports`, each with its line.
    pub extensions: Vec<Extension>,
    /// `use_existing_torch.py` where the sdist has one: the prepare step of a build against the
    /// torch present (`prepare = [["{python}", PATH]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing_torch_script: Option<String>,
    /// The CMake files read for `inputs` (none without an sdist or CMake).
    pub cmake_files: usize,
    /// `None` when the recipe has no entry for this version (or there is no recipe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub differences: Option<Vec<Difference>>,
    /// How many compared fields agree.
    pub same: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    #[error("{0}")]
    Index(String),
    #[error("cannot fetch the sdist {url}: {detail}")]
    Sdist { url: String, detail: String },
    #[error("cannot read the sdist {path}: {detail}")]
    Read { path: String, detail: String },
}

/// Drafts `name` (a recipe's name or a distribution's) at `version` (the newest final release
/// when `None`).
pub fn draft(
    set: &RecipeSet,
    name: &str,
    version: Option<&str>,
    cache: &Path,
    watch: &crate::watch::Watch,
) -> Result<Draft, DraftError> {
    let recipe = set.get(name);
    let dist = recipe.and_then(|r| r.dist.clone()).unwrap_or_else(|| name.to_string());
    let index = pypi::project_url(&dist);
    let scratch = cache.join("draft");
    let project = pypi::project(&index, &scratch).map_err(DraftError::Index)?;
    let version = match version {
        Some(v) => v.to_string(),
        None => newest(&project).ok_or_else(|| DraftError::Index(format!("{index} lists no final release")))?,
    };
    let files: Vec<&pypi::File> = project
        .files
        .iter()
        .filter(|f| f.version().as_deref() == Some(version.as_str()))
        .collect();
    if files.is_empty() {
        return Err(DraftError::Index(format!(
            "{index} lists no file of {dist} {version}: check the version, or leave it out to draft the newest release"
        )));
    }
    let sdist = files
        .iter()
        .find(|f| !f.filename.ends_with(".whl"))
        .and_then(|f| artifact(f));
    let wheels: Vec<Artifact> = files
        .iter()
        .filter(|f| f.filename.ends_with(".whl") && linux_wheel(&f.filename))
        .filter_map(|f| artifact(f))
        .collect();
    // Requires-Dist from a Linux wheel's metadata (what pip installs), else the sdist's PKG-INFO.
    let with_metadata = files
        .iter()
        .find(|f| f.filename.ends_with(".whl") && linux_wheel(&f.filename) && f.has_metadata());
    let sdist_path = match &sdist {
        Some(s) => Some(
            watch
                .download_waiting(name, s.url.rsplit('/').next().unwrap_or(&s.url), |p, waiting| {
                    let told = crate::apply::source::Told { bytes: p, waiting };
                    crate::apply::source::cached_download(&s.url, &s.sha256, cache, false, told)
                })
                .map_err(|e| DraftError::Sdist {
                    url: s.url.clone(),
                    detail: e.to_string(),
                })?,
        ),
        None => None,
    };
    // Else a wheel's own METADATA, read with range requests (a wheel-only release: torch).
    let ranged = files
        .iter()
        .filter(|f| f.filename.ends_with(".whl") && linux_wheel(&f.filename))
        .find(|f| f.filename.contains("x86_64"))
        .or_else(|| files.iter().find(|f| f.filename.ends_with(".whl")));
    let (metadata, metadata_from) = match (with_metadata, &sdist_path, ranged) {
        (Some(f), _, _) => (
            pypi::metadata(f, &scratch).map_err(DraftError::Index)?,
            format!("{}.metadata", f.url),
        ),
        (None, Some(p), _) => (
            sdist::pkg_info(p)?,
            format!("{} PKG-INFO", sdist.as_ref().map_or("", |s| s.file.as_str())),
        ),
        (None, None, Some(w)) => (
            ranged::wheel_metadata(&w.url).map_err(DraftError::Index)?,
            format!("{} METADATA", w.filename),
        ),
        (None, None, None) => (String::new(), String::new()),
    };
    let requires_python = pypi::fields(&metadata, "Requires-Python").first().map(|v| Fact {
        value: v.to_string(),
        from: metadata_from.clone(),
    });
    let requires: Vec<String> = pypi::fields(&metadata, "Requires-Dist")
        .iter()
        .map(|s| s.to_string())
        .collect();
    let depends = pins(set, &requires);
    let runtime_cuda = runtime_cuda_of(&requires).map(|value| Fact {
        value,
        from: metadata_from.clone(),
    });
    let from_index = recipe.is_some_and(|r| {
        r.versions
            .iter()
            .any(|e| matches!(e.source, Some(crate::recipe::Source::Wheel { .. })))
    });
    let wheel_requirement = from_index.then(|| format!("{dist}=={version}"));
    let (inputs, cmake_files, extensions, existing_torch_script) = match &sdist_path {
        Some(p) => {
            let files = sdist::files(p)?;
            let cmake: Vec<(String, String)> = files.iter().filter(|(f, _)| sdist::is_cmake(f)).cloned().collect();
            let setup = files.iter().find(|(f, _)| f == "setup.py").map(|(_, t)| t.as_str());
            let script = files
                .iter()
                .map(|(f, _)| f)
                .find(|f| f.rsplit('/').next() == Some("use_existing_torch.py"))
                .cloned();
            (
                inputs_of(&cmake::fetches(&cmake)),
                cmake.len(),
                setup.map(sdist::extensions_of).unwrap_or_default(),
                script,
            )
        }
        None => (Vec::new(), 0, Vec::new(), None),
    };
    let mut d = Draft {
        component: recipe.map_or_else(|| name.to_string(), |r| r.name.clone()),
        dist,
        version,
        index,
        metadata_from,
        requires_python,
        sdist,
        wheels,
        depends,
        wheel_requirement,
        runtime_cuda,
        inputs,
        extensions,
        existing_torch_script,
        cmake_files,
        differences: None,
        same: 0,
    };
    if let Some(r) = recipe {
        compare::compare(&mut d, r);
    }
    Ok(d)
}

/// major.minor of a `cuda-toolkit==13.2.2` or `nvidia-cuda-runtime[-cuNN]==12.8.90` pin.
fn runtime_cuda_of(requires: &[String]) -> Option<String> {
    requires.iter().find_map(|text| {
        let req = <pep508_rs::Requirement<pep508_rs::VerbatimUrl> as std::str::FromStr>::from_str(text).ok()?;
        let name = req.name.as_ref();
        if name != "cuda-toolkit" && !name.starts_with("nvidia-cuda-runtime") {
            return None;
        }
        let Some(pep508_rs::VersionOrUrl::VersionSpecifier(spec)) = &req.version_or_url else {
            return None;
        };
        let exact = spec.iter().find(|s| *s.operator() == pep440_rs::Operator::Equal)?;
        let release = exact.version().release();
        Some(format!("{}.{}", release.first()?, release.get(1)?))
    })
}

/// The newest final, unyanked release the project page lists.
fn newest(p: &pypi::Project) -> Option<String> {
    p.files
        .iter()
        .filter(|f| !f.is_yanked())
        .filter_map(|f| {
            let v = f.version()?;
            let parsed: pep440_rs::Version = v.parse().ok()?;
            (!parsed.any_prerelease()).then_some((parsed, v))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, v)| v)
}

fn artifact(f: &pypi::File) -> Option<Artifact> {
    Some(Artifact {
        file: f.filename.clone(),
        url: f.url.clone(),
        sha256: f.hashes.sha256.clone()?,
        size: f.size,
    })
}

/// A wheel for Linux (`manylinux`, `musllinux` or `linux` platform tags), or for any platform.
fn linux_wheel(file: &str) -> bool {
    let platform = file.trim_end_matches(".whl").rsplit('-').next().unwrap_or("");
    platform.split('.').any(|p| p.contains("linux") || p == "any")
}

/// The metadata's requirements on kiln components (extras' requirements left out).
fn pins(set: &RecipeSet, requires: &[String]) -> Vec<Pin> {
    let mut out: Vec<Pin> = Vec::new();
    for text in requires {
        let Ok(req) = <pep508_rs::Requirement<pep508_rs::VerbatimUrl> as std::str::FromStr>::from_str(text) else {
            continue;
        };
        if req.marker.try_to_string().is_some_and(|m| m.contains("extra")) {
            continue;
        }
        let Some(r) = set
            .recipes
            .values()
            .find(|r| r.dist_name().is_some_and(|d| d == req.name))
        else {
            continue;
        };
        let spec = match &req.version_or_url {
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => s.to_string(),
            _ => String::new(),
        };
        if !out.iter().any(|p| p.component == r.name) {
            out.push(Pin {
                component: r.name.clone(),
                requirement: text.clone(),
                spec,
            });
        }
    }
    out
}

/// Recipe inputs from FetchContent downloads, one per name (the first declaration with a
/// repository wins; later ones are the same input on another branch).
fn inputs_of(fetches: &[cmake::Fetch]) -> Vec<DraftInput> {
    let mut out: Vec<DraftInput> = Vec::new();
    for f in fetches {
        let name = f.name.to_ascii_lowercase().replace('_', "-");
        if out.iter().any(|i| i.name == name) {
            continue;
        }
        let tag = f.git_tag.as_ref().map(|t| t.value.clone());
        let is_commit = |t: &String| t.len() == 40 && t.bytes().all(|c| c.is_ascii_hexdigit());
        let env = match &f.override_var {
            Some(o) => o.value.clone(),
            None => format!("FETCHCONTENT_SOURCE_DIR_{}", f.name.to_ascii_uppercase()),
        };
        let mut why = vec![format!("{} {} at {}", f.command, f.name, f.at)];
        if let Some(g) = &f.git {
            why.push(format!("GIT_REPOSITORY {} ({})", g.value, g.at));
        }
        if let Some(t) = &f.git_tag {
            why.push(format!("GIT_TAG {} ({})", t.value, t.at));
        }
        if let Some(o) = &f.override_var {
            why.push(format!("{} overrides it ({})", o.value, o.at));
        }
        out.push(DraftInput {
            name,
            git: f.git.as_ref().map(|g| g.value.clone()),
            rev: tag.clone().filter(is_commit),
            tag: tag.filter(|t| !is_commit(t)),
            archive: f.url.as_ref().map(|u| u.value.clone()),
            submodules: f.submodules.clone(),
            subdir: f.source_subdir.clone(),
            env,
            why: why.join("; "),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_wheels_are_kept_and_others_left_out() {
        assert!(linux_wheel("vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"));
        assert!(linux_wheel(
            "x-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
        ));
        assert!(linux_wheel("x-1.0-py3-none-any.whl"));
        assert!(!linux_wheel("x-1.0-cp312-cp312-win_amd64.whl"));
        assert!(!linux_wheel("x-1.0-cp312-cp312-macosx_11_0_arm64.whl"));
    }
}
