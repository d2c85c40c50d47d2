//! Reasons: why a verdict is what it is, as typed values. Every verdict of `resolve` (a
//! component's status, the per-binary verdict, the JIT verdict, the driver against a runtime,
//! the owners of a component's files, whether a proof can run here, a plan step) is a list of
//! these, all of them kept; the status is the most severe one's ([`Reason::status`], with the
//! precedence of [`Status::severity`]).
//!
//! Each variant carries what the verdict rests on: its subject (a component, a distribution, a
//! binary, an import), the archs where that matters, the evidence observed (the exception text,
//! the versions, what a binary holds) and the recipe's or upstream's source where one was given.
//! Decisions match on the variants, never on words. It deliberately holds no sentences:
//! `report::reason` renders each variant (and `--json` carries both, the typed `reasons` and the
//! rendered `evidence`/`reason`).

use serde::Serialize;

use super::kernels::Lacking;
use super::owners::OtherDist;
use super::status::Status;
use crate::arch::Arch;

/// One import that ran, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ran {
    pub module: String,
    pub seconds: f64,
}

/// One JIT kernel that compiled an image loading on an arch: the kernel, the images that load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JitKernel {
    pub kernel: String,
    pub images: Vec<String>,
    pub seconds: f64,
}

/// What a JIT proof showed for one target arch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JitArch {
    pub arch: Arch,
    pub kernels: Vec<JitKernel>,
    /// A GPU of this arch is here (else the kernels compiled and were read back, not run).
    pub gpu_here: bool,
}

/// Why a verdict is what it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    // ---- the CUDA toolkit (a `kind = "cuda-toolkit"` component)
    /// A toolkit was found and fits.
    ToolkitFound {
        version: String,
        source: String,
        nvcc: Option<String>,
    },
    /// A toolkit was found outside the recipe's range.
    ToolkitTooOld {
        version: String,
        source: String,
        nvcc: Option<String>,
        need: String,
    },
    /// No toolkit anywhere kiln looked.
    NoToolkit {
        searched: Vec<String>,
        want: Option<String>,
    },

    // ---- a Python component
    /// A recipe rule says the component cannot work on these target archs.
    ArchUnsupported {
        component: String,
        archs: Vec<Arch>,
        source: String,
    },
    /// The interpreter's Python is outside the recipe's `requires.python`.
    PythonUnsupported {
        component: String,
        needs: String,
        python: String,
        have: String,
    },
    /// Its distribution is not installed.
    NotInstalled { dist: String, prefix: String },
    /// The installed version's API cannot do `lacks` on `archs` (`[[limits]]`, with upstream's
    /// line in `source`): a note, since whether a caller needs it is the caller's business.
    ArchLimits {
        component: String,
        version: String,
        archs: Vec<Arch>,
        lacks: Vec<crate::recipe::limits::Capability>,
        source: String,
    },
    /// An installed distribution no recipe manages, judged by its CUDA binaries alone
    /// ([`super::unmanaged`]): context, whatever its binaries hold.
    NotManaged { dist: String, version: String },
    /// An import the recipe names raised (or was not probed: `error` says so).
    ImportFailed { module: String, error: Option<String> },
    /// Every import a feature names ran (`flashinfer[cutedsl]`).
    FeatureImportsRan { imports: Vec<String> },
    /// Every import the recipe names ran.
    ImportsRan {
        dist: String,
        version: String,
        imports: Vec<Ran>,
    },
    /// Installed, and the recipe names no import to prove it.
    NoImportNamed { dist: String, version: String },
    /// The installed version is not a PEP 440 version.
    VersionUnreadable { version: String },
    /// The installed version is outside the recipe's `accepts` (`by` = `None`) or a dependent's
    /// requirement (`by` = the dependent).
    VersionNotAccepted {
        component: String,
        have: String,
        accepts: String,
        by: Option<String>,
    },
    /// A distribution the component uses only at exactly its own version is installed at
    /// another: the component ignores it (`source`: the recipe's `companions_why`).
    CompanionIgnored {
        component: String,
        version: String,
        companion: String,
        companion_version: String,
        source: Option<String>,
    },
    /// A companion the component uses (at its own version) holds cubins that load on `arch`:
    /// `files` of its `of` CUDA binaries ([`super::constraints::companion_images`]).
    CompanionImagesHeld {
        companion: String,
        companion_version: String,
        arch: crate::arch::Arch,
        files: usize,
        of: usize,
    },
    /// A companion the component uses holds no cubin that loads on `arch` (`held`: the images it
    /// has): what the component would load from it for that arch is not there. A note, not a
    /// failure: which of its kernels a component needs on an arch is the component's business.
    CompanionImagesMissing {
        component: String,
        companion: String,
        companion_version: String,
        arch: crate::arch::Arch,
        held: Vec<String>,
    },
    /// The driver cannot run the CUDA runtime the component is built for ([`super::driver`]).
    DriverTooOld {
        subject: String,
        runtime: String,
        runtime_major: u64,
        runtime_source: String,
        driver_major: u64,
        driver_minor: u64,
        driver_source: String,
        rule: &'static str,
    },
    /// The driver here cannot drive a GPU of a target arch: the arch's first CUDA release
    /// needs a newer driver branch ([`super::driver_table`]).
    DriverCannotDrive {
        subject: String,
        arch: Arch,
        driver: String,
        driver_source: String,
        /// The first CUDA release, its driver and branch that support the arch.
        needs_cuda: String,
        needs_driver: &'static str,
        needs_branch: String,
        source: &'static str,
    },
    /// It runs only by minor version compatibility (a newer minor than the driver's).
    MinorCompatibility {
        runtime: String,
        driver_major: u64,
        driver_minor: u64,
    },
    /// Required CUDA binaries lack a usable image for some target arch ([`super::kernels`]).
    ImagesMissing {
        archs: Vec<Arch>,
        required: usize,
        binaries: Vec<Lacking>,
        optional: Vec<Lacking>,
        /// Binaries only backends the user does not need use, lacking an arch.
        unavailable: Vec<Lacking>,
        unreadable: Vec<String>,
    },
    /// Every required CUDA binary holds a usable image for every target arch.
    ImagesHeld {
        archs: Vec<Arch>,
        checked: usize,
        required: usize,
        /// Binaries only backends the user does not need use (required with `--need`).
        by_need: usize,
        optional: Vec<Lacking>,
        unavailable: Vec<Lacking>,
        unreadable: Vec<String>,
    },
    /// The smoke test failed here.
    SmokeFailed { script: String, error: Option<String> },
    /// The smoke test passed on a GPU of a target arch.
    SmokePassed {
        script: String,
        archs: Vec<Arch>,
        seconds: f64,
    },
    /// No GPU of a target arch here: the smoke test did not run.
    SmokeNotRun { script: String },
    /// The serving proof ran on a GPU of a target arch: the real engine generated tokens on a
    /// tiny model (`served`: what it measured and the backends it chose).
    Served {
        script: String,
        archs: Vec<Arch>,
        seconds: f64,
        served: crate::probe::smoke::Served,
    },
    /// The serving proof failed here.
    ServeFailed { script: String, error: Option<String> },
    /// No GPU of a target arch here: the serving proof did not run (never a pass).
    ServeNotRun { script: String },
    /// A GPU of a target arch is here, but no driver that can drive it: the smoke test could
    /// not run (`driver` = `None`: no NVIDIA driver found; else the one found, too old).
    SmokeNeedsDriver {
        script: String,
        archs: Vec<Arch>,
        driver: Option<String>,
    },
    /// The JIT proof could not run here (`why`: what it lacked, e.g. a toolkit).
    JitNotProven { why: String },
    /// The JIT proof was left out (`--no-jit-proof`).
    JitSkipped { script: String },
    /// The JIT proof failed.
    JitFailed { script: String, error: Option<String> },
    /// The JIT proof compiled nothing that loads on `arch`; `held` is what it compiled.
    JitWrongArch {
        script: String,
        held: Vec<String>,
        arch: Arch,
    },
    /// The JIT proof compiled, for each target arch, kernels that load there.
    JitProven { script: String, archs: Vec<JitArch> },
    /// A dependency it was built against (`abi = true`) is not the one installed now (`now` =
    /// `None`: it is not installed).
    BuiltAgainst {
        dep: String,
        old: String,
        now: Option<String>,
    },
    /// Its `kiln.json` (what kiln recorded when it installed it) cannot be read: how it was built
    /// is unknown, so it is unproven until it is installed again.
    RecordUnreadable { file: String, error: String },
    /// It was built from another source than the lock names.
    OtherSource { have: String, lock: String, want: String },
    /// Installed under another distribution name than the recipe's own ([`super::owners`]).
    InstalledAs {
        component: String,
        other: OtherDist,
        accepts: String,
    },
    /// Other distributions have files in the import packages it owns alone.
    SharedImportPackage {
        component: String,
        packages: Vec<String>,
        judged: String,
        others: Vec<OtherDist>,
    },
    /// Its binaries link the NVIDIA driver's library and this machine has no driver
    /// ([`super::provable`]).
    NeedsDriver {
        binaries: Vec<String>,
        library: &'static str,
    },
    /// Binaries link a system library the machine's loader cannot find.
    NeedsSystemLibrary {
        library: String,
        /// The Debian package that provides it.
        package: String,
        binaries: Vec<String>,
    },

    // ---- a plan step
    /// Kept: the component's own reasons.
    Keep { reasons: Vec<Reason> },
    /// The component's reasons decide the step as they are (a toolkit, unsupported, blocked).
    Assessed { reasons: Vec<Reason> },
    /// Kept at an outdated version that fits every chosen version.
    KeptOutdated {
        component: String,
        version: String,
        reasons: Vec<Reason>,
    },
    /// Blocked by a dependency: `dep` is blocked, `root` is the cause (`why` its step's reasons).
    NeedsBlocked {
        dep: String,
        root: String,
        why: Vec<Reason>,
    },
    /// Replaces what is installed under another distribution name.
    ReplaceOther {
        component: String,
        other: OtherDist,
        chosen: String,
    },
    /// Replaces the installed version.
    Replace { have: String, chosen: String },
    /// A dependency it links against (`abi = true`) changes in this plan.
    AbiChanged { deps: Vec<String> },
    /// Changes because of its status and reasons.
    Change { status: Status, reasons: Vec<Reason> },
    /// The solver's note on why not the newest version.
    NotNewest { note: String },
    /// A tool the build needs is missing ([`super::tools`]' words).
    BuildNeedsTool { why: String },
    /// The build needs a CUDA toolkit in `req` for the target archs (`source`: the rule's).
    BuildNeedsToolkit {
        req: String,
        have: Option<String>,
        source: Option<String>,
    },
    /// The CUDA toolkit at `home` lacks parts the build uses ([`super::toolkit_parts`]).
    BuildNeedsToolkitParts {
        home: String,
        lacks: Vec<super::toolkit_parts::ToolkitLack>,
    },
    /// The build needs a host C++ compiler in `req` (`have`: the one found).
    BuildNeedsCompiler { req: String, have: Option<String> },
    /// The step cannot be proven on this machine.
    Unprovable { because: Box<Reason> },
    /// A `[runtime] env` or `[build]` template cannot be rendered here.
    CannotRender { error: String },
    /// Offline, and the cache lacks what the build needs.
    Offline { missing: Vec<String> },
    /// The step would install `version` again, which no recipe entry has a source for (an
    /// installed version the recipes do not describe): what it installed would be another
    /// version than the plan says. `offered`: the versions the recipe can install.
    NoSourceFor {
        component: String,
        version: String,
        offered: Vec<String>,
    },
    /// torch's cpp_extension refuses a toolkit of another CUDA major than torch's.
    TorchCudaMajor {
        torch_cuda: String,
        toolkit: String,
        torch_major: u64,
        toolkit_major: u64,
    },
}

impl Status {
    /// The precedence of statuses when several reasons speak: `broken` > `blocked` >
    /// `wrong-arch` > `stale` > `outdated` > `ok` (`missing` and `unsupported` are never mixed:
    /// each is said alone).
    pub fn severity(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Outdated => 1,
            Status::Stale => 2,
            Status::WrongArch => 3,
            Status::Blocked => 4,
            Status::Broken => 5,
            Status::Missing => 6,
            Status::Unsupported => 7,
        }
    }
}

impl Reason {
    /// The status this reason alone gives (`ok` for the positive ones and for plan reasons).
    pub fn status(&self) -> Status {
        use Reason::*;
        match self {
            ToolkitTooOld { .. }
            | NoToolkit { .. }
            | DriverTooOld { .. }
            | DriverCannotDrive { .. }
            | SmokeNeedsDriver { .. }
            | JitNotProven { .. } => Status::Blocked,
            ArchUnsupported { .. } | PythonUnsupported { .. } => Status::Unsupported,
            NotInstalled { .. } => Status::Missing,
            ImportFailed { .. }
            | SmokeFailed { .. }
            | ServeFailed { .. }
            | JitFailed { .. }
            | SharedImportPackage { .. } => Status::Broken,
            VersionUnreadable { .. } | VersionNotAccepted { .. } | CompanionIgnored { .. } => Status::Outdated,
            ImagesMissing { .. } | JitWrongArch { .. } => Status::WrongArch,
            BuiltAgainst { .. } | OtherSource { .. } | RecordUnreadable { .. } => Status::Stale,
            _ => Status::Ok,
        }
    }

    /// It says why a verdict falls short (its status is not `ok`).
    pub fn fails(&self) -> bool {
        self.status() != Status::Ok
    }

    /// Context that a component's evidence always starts with, whatever the status: who else
    /// shares its files, and what it is installed as.
    pub fn is_context(&self) -> bool {
        matches!(
            self,
            Reason::InstalledAs { .. } | Reason::SharedImportPackage { .. } | Reason::NotManaged { .. }
        )
    }

    /// The per-binary verdict (held or missing).
    pub fn is_binaries(&self) -> bool {
        matches!(self, Reason::ImagesHeld { .. } | Reason::ImagesMissing { .. })
    }
}

/// The status of a verdict: its most severe reason's, `ok` when none falls short.
pub fn status_of(reasons: &[Reason]) -> Status {
    reasons
        .iter()
        .map(Reason::status)
        .max_by_key(|s| s.severity())
        .unwrap_or(Status::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_severe_reason_decides_and_every_one_is_kept() {
        let outdated = Reason::VersionNotAccepted {
            component: "x".into(),
            have: "1".into(),
            accepts: ">=2".into(),
            by: None,
        };
        let stale = Reason::BuiltAgainst {
            dep: "torch".into(),
            old: "torch 2.9".into(),
            now: None,
        };
        let broken = Reason::ImportFailed {
            module: "x".into(),
            error: None,
        };
        let blocked = Reason::JitNotProven {
            why: "no toolkit".into(),
        };
        assert_eq!(status_of(&[]), Status::Ok);
        assert_eq!(status_of(std::slice::from_ref(&outdated)), Status::Outdated);
        assert_eq!(status_of(&[outdated.clone(), stale.clone()]), Status::Stale);
        assert_eq!(status_of(&[stale.clone(), blocked.clone()]), Status::Blocked);
        assert_eq!(status_of(&[blocked, broken, stale, outdated]), Status::Broken);
    }
}
