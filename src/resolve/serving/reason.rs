//! The typed reasons behind a serving verdict: what was found, about what, for which arch, and
//! the upstream source it rests on. Each reason says what it does to the verdict ([`Effect`]);
//! `report/` renders them as text, nothing here reads one back.

use serde::Serialize;

use crate::arch::Arch;
use crate::recipe::serving::{Family, KvDtype, Quant, Selector};
use crate::resolve::Status;

/// What a reason does to a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// It cannot work: the verdict is no.
    No,
    /// Not proven yet (it would work after an install, or nothing proved it here).
    Unproven,
    /// Evidence that it works.
    Proof,
}

/// One reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// Its kernels cannot run on `arch` (`runs_on` empty: on no NVIDIA GPU).
    ArchNotServed {
        value: String,
        arch: Arch,
        runs_on: Vec<Arch>,
        source: String,
    },
    /// The engine refuses it under this condition (quantization, KV dtype, model family, arch).
    Refused {
        value: String,
        arch: Arch,
        quant: Option<Quant>,
        kv_cache: Option<KvDtype>,
        family: Option<Family>,
        source: String,
    },
    /// It does not serve the model's weight scheme.
    QuantNotServed {
        value: String,
        quant: Quant,
        serves: Vec<Quant>,
        source: String,
    },
    /// It does not serve the KV cache dtype.
    KvNotServed {
        value: String,
        kv_cache: KvDtype,
        serves: Vec<KvDtype>,
        source: String,
    },
    /// It does not serve the model's family (MLA, DSA, ...).
    FamilyNotServed {
        value: String,
        families: Vec<Family>,
        serves: Vec<Family>,
        source: String,
    },
    /// The installed engine does not accept this value at all.
    NotAChoice {
        selector: Selector,
        value: String,
        choices: Vec<String>,
        file: String,
    },
    /// No CUDA toolkit here, and it compiles kernels at run time.
    NoToolkit {
        value: String,
        needs: String,
        source: String,
    },
    /// The toolkit here is too old for it.
    ToolkitTooOld {
        value: String,
        needs: String,
        have: String,
        source: String,
    },
    /// A component it needs is not `ok` here.
    ComponentNotOk {
        component: String,
        features: Vec<String>,
        status: Status,
    },
    /// A component it needs is `ok`, but one of its features is not.
    FeatureNotOk {
        component: String,
        feature: String,
        status: Status,
    },
    /// A CUDA binary it needs holds no image that loads on `arch`.
    BinaryLacksArch { binary: String, arch: Arch },
    /// Binaries it needs are not installed to be read (the consumer is not installed).
    BinariesNotRead { globs: Vec<String> },
    /// A JIT module it needs has not been compiled for `arch` here.
    JitNotProven {
        component: String,
        kernel: String,
        arch: Arch,
    },
    /// kiln has no facts for this value in this version.
    NoFacts {
        selector: Selector,
        value: String,
        version: Option<String>,
    },
    /// No target arch: no GPU found and no `--arch`.
    NoTargetArch,
    /// `auto` (or no flag) resolves to this value in this version.
    AutoChose {
        selector: Selector,
        value: String,
        source: String,
    },
    /// No `[[auto]]` fact covers this case; kiln assumed the engine's plain default.
    AutoDefault {
        selector: Selector,
        value: String,
        basis: String,
    },
    /// Its kernels run on `arch` and it serves the model.
    Serves { value: String, arch: Arch, source: String },
    /// Every component it needs is `ok` here.
    ComponentsOk { components: Vec<String> },
    /// Every binary it needs holds an image for `arch`.
    BinariesHold { binaries: Vec<String>, arch: Arch },
    /// A JIT module it needs was compiled for `arch` here.
    JitProven {
        component: String,
        kernel: String,
        arch: Arch,
    },
}

impl Reason {
    pub fn effect(&self) -> Effect {
        use Reason::*;
        match self {
            ArchNotServed { .. }
            | Refused { .. }
            | QuantNotServed { .. }
            | KvNotServed { .. }
            | FamilyNotServed { .. }
            | NotAChoice { .. } => Effect::No,
            NoToolkit { .. }
            | ToolkitTooOld { .. }
            | ComponentNotOk { .. }
            | FeatureNotOk { .. }
            | BinaryLacksArch { .. }
            | BinariesNotRead { .. }
            | JitNotProven { .. }
            | NoFacts { .. }
            | NoTargetArch
            | AutoDefault { .. } => Effect::Unproven,
            AutoChose { .. } | Serves { .. } | ComponentsOk { .. } | BinariesHold { .. } | JitProven { .. } => {
                Effect::Proof
            }
        }
    }

    /// The upstream source it rests on, where it has one.
    pub fn source(&self) -> Option<&str> {
        use Reason::*;
        match self {
            ArchNotServed { source, .. }
            | Refused { source, .. }
            | QuantNotServed { source, .. }
            | KvNotServed { source, .. }
            | FamilyNotServed { source, .. }
            | NoToolkit { source, .. }
            | ToolkitTooOld { source, .. }
            | AutoChose { source, .. }
            | Serves { source, .. } => Some(source),
            NotAChoice { file, .. } => Some(file),
            _ => None,
        }
    }

    /// A component (with features) `kiln install` would have to add or fix for this reason to
    /// go away.
    pub fn install(&self) -> Option<(&str, &[String])> {
        match self {
            Reason::ComponentNotOk {
                component, features, ..
            } => Some((component, features)),
            Reason::FeatureNotOk { component, feature, .. } => Some((component, std::slice::from_ref(feature))),
            _ => None,
        }
    }
}

/// `Some(true)` with no reason against, `None` when something is unproven, `Some(false)` when
/// something says no.
pub fn works(reasons: &[Reason]) -> Option<bool> {
    let worst = reasons.iter().map(Reason::effect).min();
    match worst {
        Some(Effect::No) => Some(false),
        Some(Effect::Unproven) => None,
        _ => Some(true),
    }
}
