//! How an engine resolves `auto` (or a flag left out) in one of its versions: the recipe's
//! `[[auto]]` rules of that selector, tried in file order, first match wins; each filter sees the
//! arch, the model, the KV dtype already resolved and the other flags on the command line. It deliberately does not judge the value it
//! finds ([`super::judge`] does).

use std::collections::BTreeMap;

use pep440_rs::Version;

use super::workload::Workload;
use crate::arch::Arch;
use crate::recipe::Recipe;
use crate::recipe::serving::{AutoRule, KvDtype, Selector};

/// The first `[[auto]]` rule of `selector` that matches.
pub fn rule<'r>(
    consumer: &'r Recipe,
    selector: &Selector,
    version: Option<&Version>,
    arch: Arch,
    w: &Workload,
    kv: Option<KvDtype>,
    user: &BTreeMap<Selector, String>,
) -> Option<&'r AutoRule> {
    consumer
        .serving
        .auto
        .iter()
        .filter(|r| &r.selector == selector)
        .find(|r| {
            let f = &r.when;
            f.version_matches(version)
                && (f.arch.is_empty() || f.arch.contains(&arch))
                && (f.quant.is_empty() || f.quant.contains(&w.quant))
                && (f.models.is_empty() || f.models.iter().any(|m| w.is(*m)))
                && (f.kv_cache.is_empty() || kv.is_some_and(|k| f.kv_cache.contains(&k)))
                && r.flags
                    .iter()
                    .all(|(flag, want)| user.get(&Selector::Flag(flag.clone())) == Some(want))
        })
}

/// A KV cache value as engines spell it (`fp8` is E4M3 in both SGLang and vLLM).
pub fn kv_dtype(value: &str) -> Option<KvDtype> {
    match value {
        "bf16" | "bfloat16" => Some(KvDtype::Bf16),
        "fp16" | "float16" | "half" => Some(KvDtype::Fp16),
        "fp8" | "fp8_e4m3" | "fp8_e4m3fn" => Some(KvDtype::Fp8E4m3),
        "fp8_e5m2" => Some(KvDtype::Fp8E5m2),
        _ => None,
    }
}
