//! Wheel facts kept by the wheel's sha256, so that a second plan that offers the same wheel
//! answers without reading it again: `<cache>/probe/wheels/<sha256>.json`, written whole (a
//! reader sees an old file or a new one, never a part).
//!
//! The record names the reader that wrote it ([`READER`]): one written by another kiln is read
//! again rather than trusted. It deliberately ignores what the facts mean (`resolve::wheel_choice`
//! judges them for the archs of each plan; the facts do not depend on them) and never keeps a
//! failed read.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::wheel::{self, WheelFacts};
use crate::store::atomic;

/// What wrote a record: kiln's version and the layout of [`WheelFacts`].
const READER: &str = concat!("kiln ", env!("CARGO_PKG_VERSION"), " wheel-facts 1");

#[derive(Serialize, Deserialize)]
struct Record {
    reader: String,
    sha256: String,
    facts: WheelFacts,
}

/// Where the facts of the wheel with `sha256` are kept.
pub fn path(cache: &Path, sha256: &str) -> PathBuf {
    cache.join("probe/wheels").join(format!("{sha256}.json"))
}

/// Whether a read came from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Cached,
    Read,
}

/// The facts of the wheel at `file`, whose sha256 is `sha256` (checked by whoever fetched it):
/// from the cache when a record of this reader is there, else read and kept.
pub fn read(cache: &Path, file: &Path, sha256: &str) -> Result<(WheelFacts, Source), String> {
    let at = path(cache, sha256);
    if let Some(r) = crate::state::cached_json::<Record>(&at).filter(|r| r.reader == READER && r.sha256 == sha256) {
        return Ok((r.facts, Source::Cached));
    }
    let facts = wheel::read(file)?;
    let record = Record {
        reader: READER.to_string(),
        sha256: sha256.to_string(),
        facts,
    };
    // A cache that cannot be written costs the next plan a read, nothing else.
    if let Ok(bytes) = serde_json::to_vec(&record) {
        let _ = atomic::write(&at, &bytes, atomic::Sync::Cache);
    }
    Ok((record.facts, Source::Read))
}
