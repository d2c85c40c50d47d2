//! The typed recipe: what one component is, where its source comes from, how to build it and how
//! to prove it works. Produced by [`super::parse`]; everything here is already validated.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use pep508_rs::PackageName;
use serde::Serialize;

use super::template::Template;

/// What kind of thing a component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A Python distribution kiln can install or build.
    Python,
    /// The CUDA toolkit: detected on the machine, never installed by kiln.
    CudaToolkit,
}

/// Where a component's source comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum Source {
    /// A source distribution at a URL (or a local file path), checked against its sha256.
    Sdist { url: String, sha256: String },
    /// A git repository at a tag, branch or commit.
    Git {
        url: String,
        rev: String,
        subdir: Option<String>,
        submodules: bool,
    },
    /// A directory on this machine (relative paths are relative to the recipe file).
    Path { path: PathBuf },
    /// A binary wheel from a package index (components kiln does not build, such as torch).
    Wheel {
        requirement: String,
        index_url: Option<String>,
    },
}

/// What a component needs from the machine.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Requires {
    /// Python versions it supports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    #[serde(skip)]
    pub python_spec: Option<VersionSpecifiers>,
    /// CUDA toolkit versions it builds with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    #[serde(skip)]
    pub cuda_req: Option<semver::VersionReq>,
    /// Executables its build needs on PATH (`cargo`, `protoc`, ...).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Where some of those tools come from when they are not on PATH (`[[requires.tools]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_sources: Vec<super::tool::Tool>,
    /// Host C++ compiler (g++) versions its CUDA build accepts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gcc: Option<String>,
    #[serde(skip)]
    pub gcc_req: Option<semver::VersionReq>,
    /// Arch-specific rules, each with its reason and source.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// The parts of the CUDA toolkit its build uses beyond nvcc.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub toolkit: Vec<super::toolkit::ToolkitPart>,
}

/// A rule for some target archs: a toolkit they need, or that they cannot work at all.
#[derive(Debug, Clone, Serialize)]
pub struct Rule {
    pub arch: Vec<crate::arch::Arch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    #[serde(skip)]
    pub cuda_req: Option<semver::VersionReq>,
    pub unsupported: bool,
    pub why: String,
}

/// An edge in the component graph.
#[derive(Debug, Clone, Serialize)]
pub struct Dependency {
    pub name: String,
    /// PEP 440 specifiers the dependency's version must satisfy; `None` for any version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip)]
    pub spec: Option<VersionSpecifiers>,
    /// The dependent links against the dependency's ABI and must be rebuilt when it changes.
    pub abi: bool,
    /// Features of the dependency that are needed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Why the bound is what it is, with its upstream source (`-std=c++17`, setup.py:201).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Where the dependency's key is, for diagnostics.
    #[serde(skip)]
    pub span: Option<Range<usize>>,
}

/// A smoke test: a Python script, named relative to the recipe file, that exits 0 when the
/// component does its job on the GPU.
#[derive(Debug, Clone, Serialize)]
pub struct Smoke {
    /// As written in the recipe (`smoke/torch.py`).
    pub path: String,
    /// The script, read when the recipe set is loaded.
    #[serde(skip)]
    pub text: String,
    #[serde(skip)]
    pub span: Option<Range<usize>>,
    /// A serving proof (`[verify] serve`): the script starts the real engine on a tiny model,
    /// generates tokens and prints what it measured (see `probe::smoke::Served`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub serve: bool,
}

/// A JIT proof (`[verify] jit`): a Python script, named relative to the recipe file, that
/// compiles real kernels through the component's own run-time compiler for the target archs and
/// prints the files it wrote (see `probe::jit`), run with the environment `jit_env` renders.
#[derive(Debug, Clone, Serialize)]
pub struct Jit {
    /// As written in the recipe (`jit/flashinfer.py`).
    pub path: String,
    /// The script, read when the recipe set is loaded.
    #[serde(skip)]
    pub text: String,
    #[serde(skip)]
    pub span: Option<Range<usize>>,
    /// `[verify] jit_env`: what the component's JIT reads (arch list, jobs, toolkit).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Template>,
}

/// `[aot]`: kernels of a run-time compiler compiled ahead of time (`kiln install --aot`), so
/// that a serving process loads them instead of compiling at its first request. The script
/// compiles the named modules and says, for each, the file it wrote and where in site-packages
/// the component looks for it (see `session::aot`).
#[derive(Debug, Clone, Serialize)]
pub struct Aot {
    /// The script and the environment it runs with (`[aot] script`, `[aot] env`), as for a JIT proof.
    pub script: Jit,
    /// The modules it compiles, by the names the script knows.
    pub modules: Vec<String>,
    /// Modules it knows but compiles only when asked (`kiln install --aot-module NAME`): those
    /// that take many minutes and serve one kind of model (`[aot] on_request`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_request: Vec<String>,
}

/// How to turn the source into an installed wheel.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Build {
    /// PEP 508 requirements installed into a private overlay for the build (never into the env).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Environment for every build command.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Template>,
    /// Commands run in the source tree before the wheel build.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prepare: Vec<Vec<Template>>,
    /// The wheel build command; `None` means `{python} -m pip wheel -v --no-deps --no-build-isolation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<Vec<Template>>,
    /// Peak memory of one compile job, used to choose `{jobs}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_per_job: Option<u64>,
    /// A Cargo manifest inside the source (Rust extensions), read with `cargo metadata` first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cargo_manifest: Option<String>,
    /// `stall = "20m"`: a build command that writes nothing and uses no CPU time for this long is
    /// killed. Not part of the wheel-cache key: it does not decide the binary.
    #[serde(skip)]
    pub stall: Option<std::time::Duration>,
    /// `limit = "6h"`: the whole build (every command of it) is killed after this long.
    #[serde(skip)]
    pub limit: Option<std::time::Duration>,
    /// `[[build.inputs]]`: sources the upstream build would download itself, fetched by kiln
    /// first (for one version: [`Recipe::build_of`] merges that version's own).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<super::inputs::Input>,
    /// `[[build.targets]]`: what the upstream build compiles, with upstream's arch lists, so the
    /// plan can say what a build for some archs compiles (for one version: [`Recipe::build_of`]
    /// takes that version's own). Not part of the wheel-cache key: it describes, not decides.
    #[serde(skip)]
    pub targets: Vec<super::targets::Target>,
    /// `network = false|true`: whether the build commands may reach the network. Unset: denied
    /// when the build declares inputs (they are all it may download), allowed otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
}

impl Build {
    /// Whether the build commands run with the network denied (where the platform allows).
    pub fn denies_network(&self) -> bool {
        !self.network.unwrap_or(self.inputs.is_empty())
    }
}

/// `90s`, `20m`, `6h`, `1d` (a number and a unit; `1h30m` is not accepted).
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    n.checked_mul(secs)
        .filter(|&t| t > 0)
        .map(std::time::Duration::from_secs)
}

/// An optional part of a component (`flashinfer[cutedsl]`).
#[derive(Debug, Clone, Serialize)]
pub struct Feature {
    pub summary: String,
    pub depends: Vec<Dependency>,
    pub imports: Vec<String>,
}

/// One version a recipe describes (`[[versions]]`), with its own source and pins.
#[derive(Debug, Clone, Serialize)]
pub struct VersionEntry {
    pub version: Version,
    pub source: Option<Source>,
    /// Dependencies of this version; they replace the recipe's `[depends]` entry of the same name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends: Vec<Dependency>,
    /// Prebuilt wheels of this version (`wheels = [...]`), one per platform, offered next to its
    /// source: kiln installs one only when its binaries prove it (see `resolve::wheel_choice`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wheels: Vec<super::binaries::PrebuiltWheel>,
    /// `[[versions.inputs]]`: build inputs of this version; they replace the recipe's
    /// `[[build.inputs]]` of the same name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<super::inputs::Input>,
    /// `[[versions.targets]]`: the build targets of this version, in place of the recipe's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<super::targets::Target>,
    /// `prepare` of this version, in place of `[build] prepare` (files move between releases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepare: Option<Vec<Vec<Template>>>,
    /// `imports` of this version, in place of `[verify] imports` (extensions are renamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imports: Option<Vec<String>>,
    /// `runtime_cuda`: the CUDA runtime this version's binary wheel is built for (torch's
    /// `torch.version.cuda`), when the recipe knows it before installing; a driver too old for
    /// it blocks the step at plan time.
    pub runtime_cuda: Option<semver::Version>,
    /// `constraints`: PEP 508 requirements on this version's runtime dependencies that its own
    /// metadata leaves too open (an unpinned dependency whose newer releases break it), applied
    /// wherever they are resolved: the install's constraints and `bundle --for`'s wheelhouse.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// `python`: the Python versions this version supports (its Requires-Python), where they
    /// are narrower than `[requires] python`; the solver offers it only to such an interpreter.
    #[serde(skip)]
    pub python: Option<VersionSpecifiers>,
    /// `gcc`: the host compiler this version's build needs, in place of `[requires] gcc`
    /// (vLLM 0.33.0 needs 13, 0.26.0 11.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gcc: Option<semver::VersionReq>,
}

impl VersionEntry {
    /// A version with a source and nothing of its own (no pins, wheels, inputs or overrides).
    pub fn bare(version: Version, source: Option<Source>) -> VersionEntry {
        VersionEntry {
            version,
            source,
            depends: Vec::new(),
            wheels: Vec::new(),
            inputs: Vec::new(),
            targets: Vec::new(),
            prepare: None,
            imports: None,
            runtime_cuda: None,
            constraints: Vec::new(),
            python: None,
            gcc: None,
        }
    }
}

/// One validated recipe.
#[derive(Debug, Clone, Serialize)]
pub struct Recipe {
    pub name: String,
    /// The Python distribution it installs, as written (`None` for the CUDA toolkit); a valid
    /// PEP 508 name, see [`Recipe::dist_name`].
    pub dist: Option<String>,
    /// Distribution names the component was published under before (`sgl-kernel` for
    /// `sglang-kernel`), as written; an installed one counts as the component installed under
    /// that name, and installing the component replaces it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub former: Vec<String>,
    /// Top-level import packages the component owns alone (`sgl_kernel`): any other
    /// distribution with files in one is reported, and replaced by an install.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub import_packages: Vec<String>,
    /// Distributions it uses only at exactly its own version (`flashinfer-cubin` for
    /// flashinfer): one installed at another version is ignored by the component.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub companions: Vec<String>,
    /// Upstream's line that says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub companions_why: Option<String>,
    pub kind: Kind,
    /// What kiln installs when it must install or build.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    /// Installed versions that count as good; defaults to `>=version`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepts: Option<String>,
    #[serde(skip)]
    pub accepts_spec: Option<VersionSpecifiers>,
    pub summary: String,
    pub source: Option<Source>,
    pub requires: Requires,
    pub depends: Vec<Dependency>,
    pub build: Build,
    /// Install the wheel's own dependencies too (pinned so that no kiln component is replaced).
    pub install_deps: bool,
    /// Imports that prove the component works.
    pub imports: Vec<String>,
    /// A script that proves it works on the GPU (`[verify] smoke`), run only where a GPU of
    /// the target arch is present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smoke: Option<Smoke>,
    /// A script that proves its run-time compiler produces kernels for the target archs
    /// (`[verify] jit`), run with no GPU needed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jit: Option<Jit>,
    /// `[runtime] env`: what the component reads when it runs (a JIT's arch list and jobs),
    /// installed with it as defaults every interpreter of the environment sets at start-up.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub runtime_env: BTreeMap<String, Template>,
    /// `[aot]`: what `install --aot` compiles ahead of time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aot: Option<Aot>,
    pub features: BTreeMap<String, Feature>,
    /// The versions kiln can install, in order of preference (newest first). Without
    /// `[[versions]]` this is the one `[package] version` with `[source]`.
    pub versions: Vec<VersionEntry>,
    /// Runtime backends this component offers (`[[backends]]`), in file order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<super::serving::Backend>,
    /// How a serving command line starts it, where its installed version lists a flag's
    /// values, and how `auto` resolves (`[serving]`, `[[auto]]`).
    pub serving: super::serving::Serving,
    /// `[[binaries.optional]]`: CUDA binaries that may lack an image for some archs, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub optional_binaries: Vec<super::binaries::OptionalBinaries>,
    /// `[[limits]]`: what its API cannot do on some archs, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<super::limits::Limit>,
    /// The names of every component it may depend on (all features and versions), sorted:
    /// filled when the set is loaded, so that graph walks need not sort them each time.
    #[serde(skip)]
    pub depends_sorted: Vec<String>,
    /// The file it came from, as shown to users.
    pub file: String,
    /// The directory relative paths resolve against (`None` for embedded recipes).
    #[serde(skip)]
    pub dir: Option<PathBuf>,
}

impl Recipe {
    /// The distribution it installs as a normalized name (`Flash_Attn` and `flash-attn` are one
    /// name), for comparing with what is installed. Loading checked that it is a valid name.
    pub fn dist_name(&self) -> Option<PackageName> {
        self.dist.as_deref().and_then(|d| PackageName::from_str(d).ok())
    }

    /// Whether an installed version counts as good.
    pub fn accepts_version(&self, v: &Version) -> bool {
        match (&self.accepts_spec, &self.version) {
            (Some(spec), _) => spec.contains(v),
            (None, Some(want)) => v >= want,
            (None, None) => true,
        }
    }

    /// The constraint `accepts_version` applies, in words.
    pub fn accepts_text(&self) -> String {
        match (&self.accepts, &self.version) {
            (Some(a), _) => a.clone(),
            (None, Some(v)) => format!(">={v}"),
            (None, None) => "any version".into(),
        }
    }

    /// The version entry for `v`, if the recipe describes it.
    pub fn version_entry(&self, v: &Version) -> Option<&VersionEntry> {
        self.versions.iter().find(|e| &e.version == v)
    }

    /// Whether the recipe can install `v` itself: a `[[versions]]` entry of it, or the recipe's
    /// one version. The source of another version would install another version than `v`.
    pub fn describes(&self, v: &Version) -> bool {
        self.version_entry(v).is_some() || self.version.as_ref() == Some(v)
    }

    /// The source of `version` (its own, else the recipe's); the recipe's for `None`.
    pub fn source_of(&self, version: Option<&str>) -> Option<&Source> {
        version
            .and_then(|v| v.parse::<Version>().ok())
            .and_then(|v| self.version_entry(&v))
            .and_then(|e| e.source.as_ref())
            .or(self.source.as_ref())
    }

    /// The build of version `v`: `[build]` with that version's `prepare` and targets in place
    /// of the recipe's and its inputs merged (its own replace the recipe's of the same name, in the
    /// recipe's order, then its new ones). Borrowed when the version changes nothing.
    pub fn build_of(&self, v: Option<&Version>) -> std::borrow::Cow<'_, Build> {
        let Some(e) = v.and_then(|v| self.version_entry(v)) else {
            return std::borrow::Cow::Borrowed(&self.build);
        };
        if e.prepare.is_none() && e.inputs.is_empty() && e.targets.is_empty() {
            return std::borrow::Cow::Borrowed(&self.build);
        }
        let mut b = self.build.clone();
        if let Some(p) = &e.prepare {
            b.prepare = p.clone();
        }
        if !e.targets.is_empty() {
            b.targets = e.targets.clone();
        }
        for own in &e.inputs {
            match b.inputs.iter_mut().find(|i| i.name == own.name) {
                Some(slot) => *slot = own.clone(),
                None => b.inputs.push(own.clone()),
            }
        }
        std::borrow::Cow::Owned(b)
    }

    /// The imports that prove version `v` works (its own, else `[verify] imports`).
    pub fn imports_of(&self, v: Option<&Version>) -> &[String] {
        v.and_then(|v| self.version_entry(v))
            .and_then(|e| e.imports.as_deref())
            .unwrap_or(&self.imports)
    }

    /// The imports of every version the recipe describes (for a probe that runs before the
    /// installed version is known), each once, in order.
    pub fn all_imports(&self) -> Vec<&String> {
        let mut out: Vec<&String> = self.imports.iter().collect();
        for m in self.versions.iter().filter_map(|e| e.imports.as_ref()).flatten() {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    /// The dependencies of version `v` (the recipe's `[depends]`, with that version's own pins
    /// replacing entries of the same name) with the given features switched on.
    pub fn depends_of<'a>(&'a self, v: Option<&Version>, features: &'a [String]) -> Vec<&'a Dependency> {
        let own: &[Dependency] = v.and_then(|v| self.version_entry(v)).map_or(&[], |e| &e.depends);
        let mut out: Vec<&Dependency> = self
            .depends_with(features)
            .filter(|d| !own.iter().any(|o| o.name == d.name))
            .collect();
        out.extend(own.iter());
        out
    }

    /// The dependencies of the component with the given features switched on.
    pub fn depends_with<'a, 'f>(
        &'a self,
        features: &'f [String],
    ) -> impl Iterator<Item = &'a Dependency> + use<'a, 'f> {
        self.depends.iter().chain(
            features
                .iter()
                .filter_map(|f| self.features.get(f))
                .flat_map(|f| f.depends.iter()),
        )
    }
}
