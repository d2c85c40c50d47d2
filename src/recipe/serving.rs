//! The serving facts a consumer's recipe declares (`[[backends]]`, `[[backends.refuse]]`,
//! `[[auto]]`, `[serving]`): for each flag (or environment variable) and value of an engine, in
//! which of the engine's versions, where its kernels run, which quantization schemes, KV cache
//! dtypes and model families it serves, what it needs, and how `auto` resolves — each with the
//! upstream line it rests on. Plain validated data; [`crate::resolve::serving`] judges it. It
//! deliberately knows nothing about the machine or a model.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use serde::Serialize;

use crate::arch::Arch;

/// What part of serving a flag chooses; groups `doctor`'s output and decides which flags a model
/// makes relevant (MoE kinds only for models with routed experts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    KvCache,
    Attention,
    AttentionPrefill,
    AttentionDecode,
    DsaPrefill,
    DsaDecode,
    Moe,
    Fp4Gemm,
    Quantization,
}

impl BackendKind {
    /// Every kind, in the order `kiln check` resolves them: the KV cache dtype first (attention
    /// facts depend on it), then attention and its sub-backends, MoE, FP4 GEMM, quantization.
    pub const ALL: [BackendKind; 9] = [
        BackendKind::KvCache,
        BackendKind::Attention,
        BackendKind::AttentionPrefill,
        BackendKind::AttentionDecode,
        BackendKind::DsaPrefill,
        BackendKind::DsaDecode,
        BackendKind::Moe,
        BackendKind::Fp4Gemm,
        BackendKind::Quantization,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::KvCache => "kv-cache",
            BackendKind::Attention => "attention",
            BackendKind::AttentionPrefill => "attention-prefill",
            BackendKind::AttentionDecode => "attention-decode",
            BackendKind::DsaPrefill => "dsa-prefill",
            BackendKind::DsaDecode => "dsa-decode",
            BackendKind::Moe => "moe",
            BackendKind::Fp4Gemm => "fp4-gemm",
            BackendKind::Quantization => "quantization",
        }
    }
    /// Whether only models with routed experts use it.
    pub fn moe_only(self) -> bool {
        self == BackendKind::Moe
    }
    /// Whether only DSA models use it.
    pub fn dsa_only(self) -> bool {
        matches!(self, BackendKind::DsaPrefill | BackendKind::DsaDecode)
    }
}

/// Defines a closed vocabulary: an enum, its spellings, `FromStr` and `Display`.
macro_rules! vocabulary {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(format!(
                        "`{s}` is not one of {}",
                        [$($text),+].join(", ")
                    )),
                }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

vocabulary! {
    /// A checkpoint's weight (and activation) scheme, as read from its `config.json`.
    Quant {
        Bf16 = "bf16",
        Fp16 = "fp16",
        Fp8 = "fp8",
        Fp8Block = "fp8-block",
        Nvfp4 = "nvfp4",
        Nvfp4W4a16 = "nvfp4-w4a16",
        Mxfp4 = "mxfp4",
        Int4W4a16 = "int4-w4a16",
    }
}

vocabulary! {
    /// A KV cache dtype (`auto` is resolved before anything is judged).
    KvDtype {
        Bf16 = "bf16",
        Fp16 = "fp16",
        Fp8E4m3 = "fp8_e4m3",
        Fp8E5m2 = "fp8_e5m2",
    }
}

vocabulary! {
    /// A model family, as far as backends care.
    Family {
        Mha = "mha",
        Mla = "mla",
        Dsa = "dsa",
        Moe = "moe",
        SlidingWindow = "sliding-window",
    }
}

/// Where a backend is chosen: a command-line flag or an environment variable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case", tag = "by", content = "name")]
pub enum Selector {
    Flag(String),
    Env(String),
}

impl Selector {
    pub fn name(&self) -> &str {
        match self {
            Selector::Flag(n) | Selector::Env(n) => n,
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Conditions a fact applies under; an absent (empty) list matches anything.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Filters {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<String>,
    #[serde(skip)]
    pub versions_spec: Option<VersionSpecifiers>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arch: Vec<Arch>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quant: Vec<Quant>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kv_cache: Vec<KvDtype>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<Family>,
}

impl Filters {
    /// Whether the consumer version `v` is in range (an unknown version matches only an
    /// unscoped fact).
    pub fn version_matches(&self, v: Option<&Version>) -> bool {
        match (&self.versions_spec, v) {
            (None, _) => true,
            (Some(spec), Some(v)) => spec.contains(v),
            (Some(_), None) => false,
        }
    }
}

/// A condition under which a backend does not work (`[[backends.refuse]]`).
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    #[serde(flatten)]
    pub when: Filters,
    pub why: String,
}

/// One value of one flag, in a range of the engine's versions.
#[derive(Debug, Clone, Serialize)]
pub struct Backend {
    pub selector: Selector,
    pub value: String,
    pub kind: BackendKind,
    /// The consumer versions it holds for; `arch` is where its kernels can run (empty with
    /// `arch_given`: not on NVIDIA GPUs), `quant`/`kv_cache`/`models` what it serves.
    #[serde(flatten)]
    pub serves: Filters,
    /// Whether `arch` was written (an empty written list means "nowhere").
    #[serde(skip)]
    pub arch_given: bool,
    /// Components (with features) it needs besides its consumer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<(String, Vec<String>)>,
    /// The CUDA toolkit it needs at run time (JIT compiles), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    #[serde(skip)]
    pub cuda_req: Option<semver::VersionReq>,
    /// CUDA binaries of the consumer's distribution (globs over RECORD paths) that must hold
    /// the arch for it; required only for the backends that name them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binaries: Option<super::binaries::ServedBinaries>,
    /// JIT modules (`component:kernel`) that must compile for the arch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jit: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refuse: Vec<Refusal>,
    /// The reason for its rules, with its upstream source.
    pub why: String,
    #[serde(skip)]
    pub span: Option<Range<usize>>,
}

impl Backend {
    /// `FLAG=VALUE`, the way `--need` names it.
    pub fn spelled(&self) -> String {
        format!("{}={}", self.selector, self.value)
    }

    /// Whether it describes the consumer's version `version` (`None`: unknown, so yes). The
    /// serving judge is stricter ([`Filters::version_matches`]): an unknown version there takes
    /// only unscoped facts.
    pub fn describes(&self, version: Option<&Version>) -> bool {
        match (&self.serves.versions_spec, version) {
            (Some(spec), Some(v)) => spec.contains(v),
            _ => true,
        }
    }
}

/// How `auto` (or an absent flag) resolves in a range of versions (`[[auto]]`).
#[derive(Debug, Clone, Serialize)]
pub struct AutoRule {
    pub selector: Selector,
    #[serde(flatten)]
    pub when: Filters,
    /// Other flags the rule needs on the command line, with their values
    /// (`flags = { "--quantization" = "modelopt_fp4" }`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<(String, String)>,
    pub value: String,
    pub why: String,
    #[serde(skip)]
    pub span: Option<Range<usize>>,
}

/// Where an installed engine keeps the values a flag accepts (`[[serving.choices]]`): a
/// module-level list or tuple of strings, or the members of an enum class, in a file of its
/// distribution, read without importing it.
#[derive(Debug, Clone, Serialize)]
pub struct ChoicesAt {
    pub selector: Selector,
    #[serde(flatten)]
    pub when: Filters,
    /// The path inside the distribution (`sglang/srt/arg_groups/choices.py`).
    pub file: String,
    /// The variable or class that holds them.
    pub name: String,
    /// For an enum class: its members' names are the values (`members = "names"`), not their values.
    pub member_names: bool,
}

/// `[serving]`: how a serving command line starts this engine.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Serving {
    /// Command prefixes that start it (`python -m sglang.launch_server`, `vllm serve`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entry: Vec<Vec<String>>,
    /// Flags that name the model directory.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub model_flags: Vec<String>,
    /// Whether the first positional argument after the entry is the model (`vllm serve MODEL`).
    pub model_positional: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<ChoicesAt>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto: Vec<AutoRule>,
}
