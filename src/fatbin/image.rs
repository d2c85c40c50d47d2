//! What one kernel image in a fatbin is: SASS or PTX, its SM number and variant (`a`, `f`),
//! its version, and how its payload is stored. It deliberately ignores where images come from
//! (the layout walk) and whether they run on a device (`arch::run`).

use serde::{Deserialize, Serialize};

/// SASS or PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    Cubin,
    Ptx,
}

/// Plain, arch-specific (`a`) or family-specific (`f`), from the entry flags (bits 20 and 21).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Plain,
    Arch,
    Family,
}

impl Variant {
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Plain => "",
            Variant::Arch => "a",
            Variant::Family => "f",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

/// One kernel image in a fatbin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Image {
    pub kind: ImageKind,
    /// SM number without suffix: 120 for sm_120a.
    pub sm: u32,
    pub variant: Variant,
    /// PTX ISA version (`9.5`) for PTX; the cubin ABI version for SASS.
    pub version: (u16, u16),
    pub compression: Compression,
    /// File offset of the entry header.
    pub offset: u64,
    /// Inside a concatenated (`--concat`) entry.
    pub concatenated: bool,
    /// File offset and length of the payload as stored (compressed when compressed).
    #[serde(skip)]
    pub(super) payload_at: u64,
    #[serde(skip)]
    pub(super) payload_len: u64,
    /// The size the header states once decompressed (0 when not compressed).
    #[serde(skip)]
    pub(super) uncompressed: u64,
    /// For concatenated images: offset and size inside the decompressed blob.
    #[serde(skip)]
    pub(super) blob_range: Option<(u64, u64)>,
}

impl Image {
    /// `sm_120a` or `compute_120f`.
    pub fn name(&self) -> String {
        let prefix = match self.kind {
            ImageKind::Cubin => "sm",
            ImageKind::Ptx => "compute",
        };
        format!("{prefix}_{}{}", self.sm, self.variant.suffix())
    }

    /// `9.5` for PTX.
    pub fn ptx_isa(&self) -> Option<String> {
        (self.kind == ImageKind::Ptx).then(|| format!("{}.{}", self.version.0, self.version.1))
    }
}
