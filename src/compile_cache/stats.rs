//! What one sccache server saw: `sccache --show-stats --stats-format=json` (sccache 0.16's
//! `ServerStats`, `cache_hits.counts` / `cache_misses.counts` by language), reduced to what a
//! person asks of a build: how many translation units came from the cache, how many compiled.
//!
//! For nvcc, sccache counts one `CUDA` entry per translation unit and one entry for each step
//! nvcc runs inside it (`CUDA (Device code)` for cudafe++, `PTX` for cicc, `CUBIN` for ptxas);
//! a translation unit is counted once, and the inner steps that missed are counted apart as
//! `device_misses`, so "nothing compiled" means both are zero. It deliberately ignores timings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The inner steps of an nvcc compile, counted by sccache beside the translation unit.
const NVCC_STEPS: &[&str] = &["CUDA (Device code)", "PTX", "CUBIN"];

/// A step's compile-cache record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// The backend, as shown (`redis://host:port`, a directory).
    pub backend: String,
    /// Translation units whose object came from the cache.
    pub hits: u64,
    /// Translation units compiled (and stored).
    pub misses: u64,
    /// nvcc's inner steps (cudafe++, cicc, ptxas) that compiled.
    pub device_misses: u64,
    /// Hits and misses by sccache's language names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_language: BTreeMap<String, (u64, u64)>,
    /// Reads and writes the backend failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors: u64,
    /// Why the step was (partly) built without the cache, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncached: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Deserialize)]
struct Doc {
    stats: Raw,
}

#[derive(Deserialize)]
struct Raw {
    cache_hits: Counts,
    cache_misses: Counts,
    #[serde(default)]
    cache_read_errors: u64,
    #[serde(default)]
    cache_write_errors: u64,
}

#[derive(Deserialize)]
struct Counts {
    counts: BTreeMap<String, u64>,
}

impl Stats {
    /// Reads `sccache --show-stats --stats-format=json`.
    pub fn parse(json: &str, backend: &str) -> Result<Stats, String> {
        let d: Doc = serde_json::from_str(json).map_err(|e| format!("sccache's statistics do not parse: {e}"))?;
        let mut s = Stats {
            backend: backend.to_string(),
            errors: d.stats.cache_read_errors + d.stats.cache_write_errors,
            ..Stats::default()
        };
        for (lang, n) in &d.stats.cache_hits.counts {
            s.by_language.entry(lang.clone()).or_default().0 += n;
        }
        for (lang, n) in &d.stats.cache_misses.counts {
            s.by_language.entry(lang.clone()).or_default().1 += n;
        }
        for (lang, (h, m)) in &s.by_language {
            if NVCC_STEPS.contains(&lang.as_str()) {
                s.device_misses += m;
            } else {
                s.hits += h;
                s.misses += m;
            }
        }
        Ok(s)
    }

    /// Adds what another server of the same step saw (after a fallback).
    pub fn add(&mut self, o: &Stats) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.device_misses += o.device_misses;
        self.errors += o.errors;
        for (lang, (h, m)) in &o.by_language {
            let e = self.by_language.entry(lang.clone()).or_default();
            e.0 += h;
            e.1 += m;
        }
    }

    /// `3 hits, 0 compiled` (and the inner nvcc steps that compiled, when any).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "compile cache: {} hit{}, {} compiled",
            self.hits,
            if self.hits == 1 { "" } else { "s" },
            self.misses
        );
        if self.device_misses > 0 {
            s.push_str(&format!(" ({} nvcc device steps compiled)", self.device_misses));
        }
        if let Some(why) = &self.uncached {
            s.push_str(&format!("; uncached: {why}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from sccache 0.16.0 after one nvcc compile that missed and one that hit.
    const TWO: &str = r#"{"stats":{"compile_requests":2,"cache_hits":{"counts":{"CUDA":1,"CUBIN":1,
        "CUDA (Device code)":1,"PTX":1},"adv_counts":{}},"cache_misses":{"counts":{"PTX":1,"CUBIN":1,
        "CUDA (Device code)":1,"CUDA":1},"adv_counts":{}},"cache_read_errors":0,"cache_write_errors":2,
        "non_cacheable_compilations":2},"cache_location":"redis","version":"0.16.0"}"#;

    #[test]
    fn a_translation_unit_counts_once_and_nvccs_inner_steps_apart() {
        let s = Stats::parse(TWO, "redis://h:1").unwrap();
        assert_eq!((s.hits, s.misses, s.device_misses, s.errors), (1, 1, 3, 2));
        assert_eq!(s.by_language["CUDA"], (1, 1));
        assert_eq!(
            s.summary(),
            "compile cache: 1 hit, 1 compiled (3 nvcc device steps compiled)"
        );
        let mut t = s.clone();
        t.add(&s);
        assert_eq!((t.hits, t.misses, t.by_language["PTX"]), (2, 2, (2, 2)));
        assert!(Stats::parse("{}", "x").is_err());
    }
}
