//! `[[limits]]`: what a library's API cannot do on some archs (flash-attn-4's SM120 forward has no
//! paged KV, SplitKV or block sparsity), each with the versions it holds for and the upstream
//! line that says so. Plain validated data: `resolve::status` notes the limits that hold for an
//! installed version on the target archs. It deliberately does not judge whether a caller needs
//! the capability (a serving engine's backend facts do).

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use serde::Serialize;

use crate::arch::Arch;

/// A capability of an attention library's API that an arch may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// A paged KV cache (a page table), which serving engines use.
    PagedKv,
    /// Splitting the KV sequence across CTAs (SplitKV, `num_splits > 1`).
    SplitKv,
    /// Block-sparse attention masks.
    BlockSparsity,
    /// The backward pass.
    Backward,
}

impl Capability {
    pub const ALL: &'static [Capability] = &[
        Capability::PagedKv,
        Capability::SplitKv,
        Capability::BlockSparsity,
        Capability::Backward,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::PagedKv => "paged-kv",
            Capability::SplitKv => "split-kv",
            Capability::BlockSparsity => "block-sparsity",
            Capability::Backward => "backward",
        }
    }
}

impl FromStr for Capability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Capability::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
                format!("`{s}` is not one of {}", all.join(", "))
            })
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Capability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One `[[limits]]` entry.
#[derive(Debug, Clone, Serialize)]
pub struct Limit {
    /// The archs on which the API lacks them.
    pub arch: Vec<Arch>,
    /// What it lacks there.
    pub lacks: Vec<Capability>,
    /// The component versions it holds for (absent: every version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<String>,
    #[serde(skip)]
    pub versions_spec: Option<VersionSpecifiers>,
    /// The upstream line that says so.
    pub why: String,
    #[serde(skip)]
    pub span: Option<Range<usize>>,
}

impl Limit {
    /// Whether it holds for the component's version `v` (an unknown version: yes).
    pub fn holds_for(&self, v: Option<&Version>) -> bool {
        match (&self.versions_spec, v) {
            (Some(spec), Some(v)) => spec.contains(v),
            _ => true,
        }
    }
}
