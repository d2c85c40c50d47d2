//! Serving verdicts: will this engine, in this version, serve this model with these flags on
//! each target arch here? For each flag that matters to the model (the KV cache dtype first,
//! then attention and its sub-backends, MoE for models with experts, FP4 GEMM for NVFP4
//! checkpoints, and any other flag the user set), the value the user chose or the one `auto`
//! resolves to in that version, judged on upstream's facts and this machine's evidence, with
//! every reason kept and the alternatives that are not ruled out. It deliberately does not read
//! files or run anything: the session hands it the facts, the model's workload and the flags.

pub mod auto;
pub mod cmdline;
pub mod judge;
pub mod reason;
pub mod summary;
pub mod workload;

use std::collections::BTreeMap;

use pep440_rs::Version;
use serde::Serialize;

use crate::arch::Arch;
use crate::recipe::Recipe;
use crate::recipe::serving::{BackendKind, KvDtype, Quant, Selector};
pub use judge::Evidence;
use reason::Reason;
use workload::Workload;

/// Who chose a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChosenBy {
    User,
    Auto,
}

/// Another value of the same flag, and whether it is ruled out.
#[derive(Debug, Clone, Serialize)]
pub struct Alternative {
    pub value: String,
    pub works: Option<bool>,
}

/// One flag's value, judged for one arch.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub selector: Selector,
    pub kind: BackendKind,
    pub value: String,
    pub chosen_by: ChosenBy,
    pub arch: Arch,
    pub works: Option<bool>,
    pub reasons: Vec<Reason>,
    /// Other values of the flag, those that work first (only when this one does not work).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
    /// What `kiln install` would have to add for it to work here, as targets (`flashinfer[cutedsl]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub install: Vec<String>,
}

/// What is asked.
pub struct Request<'a> {
    pub consumer: &'a Recipe,
    /// The engine's version (installed, pinned, or what a plan would install).
    pub version: Option<Version>,
    pub archs: &'a [Arch],
    pub workload: &'a Workload,
    /// Values set on the command line or in the environment, by selector.
    pub user: &'a BTreeMap<Selector, String>,
    /// The values the installed engine accepts, by selector, with the file that lists them.
    pub choices: &'a BTreeMap<Selector, (Vec<String>, String)>,
}

/// The selectors of `kind` the consumer has facts or `auto` rules for, in file order.
fn selectors(r: &Recipe, kind: BackendKind, version: Option<&Version>) -> Vec<Selector> {
    let mut out: Vec<Selector> = Vec::new();
    for b in judge::applicable(r, version).into_iter().filter(|b| b.kind == kind) {
        if !out.contains(&b.selector) {
            out.push(b.selector.clone());
        }
    }
    out
}

/// Whether a kind is judged for this model even when the user did not set it.
fn always(kind: BackendKind, w: &Workload) -> bool {
    match kind {
        BackendKind::KvCache | BackendKind::Attention => true,
        BackendKind::Moe => w.is(crate::recipe::serving::Family::Moe),
        BackendKind::Fp4Gemm => w.quant == Quant::Nvfp4,
        BackendKind::DsaPrefill | BackendKind::DsaDecode => w.is(crate::recipe::serving::Family::Dsa),
        _ => false,
    }
}

/// The reasons for `value` of `selector` on `arch`.
fn reasons_for(
    req: &Request,
    ev: &Evidence,
    selector: &Selector,
    value: &str,
    arch: Arch,
    kv: Option<KvDtype>,
) -> Vec<Reason> {
    let v = req.version.as_ref();
    if let Some((choices, file)) = req.choices.get(selector)
        && !choices.iter().any(|c| c == value)
    {
        return vec![Reason::NotAChoice {
            selector: selector.clone(),
            value: value.to_string(),
            choices: choices.clone(),
            file: file.clone(),
        }];
    }
    match judge::fact(req.consumer, v, selector, value) {
        Some(b) => {
            let mut out = judge::upstream(b, arch, Some(req.workload), kv);
            out.extend(judge::here(ev, req.consumer, b, arch));
            out
        }
        None => vec![Reason::NoFacts {
            selector: selector.clone(),
            value: value.to_string(),
            version: v.map(|v| v.to_string()),
        }],
    }
}

/// The other values of `selector` that are not ruled out, those that work first.
fn alternatives(
    req: &Request,
    ev: &Evidence,
    selector: &Selector,
    value: &str,
    arch: Arch,
    kv: Option<KvDtype>,
) -> Vec<Alternative> {
    let mut out: Vec<Alternative> = judge::applicable(req.consumer, req.version.as_ref())
        .into_iter()
        .filter(|b| &b.selector == selector && b.value != value)
        .map(|b| Alternative {
            value: b.value.clone(),
            works: reason::works(&reasons_for(req, ev, selector, &b.value, arch, kv)),
        })
        .filter(|a| a.works != Some(false))
        .collect();
    out.sort_by_key(|a| a.works != Some(true));
    out
}

/// Every verdict, per arch, in resolution order.
pub fn check(req: &Request, ev: &Evidence) -> Vec<Verdict> {
    let v = req.version.as_ref();
    let w = req.workload;
    let mut out = Vec::new();
    // Each selector once, under the first kind (in resolution order) a fact gives it.
    let mut order: Vec<(BackendKind, Selector)> = Vec::new();
    // Kinds in the order they are resolved (a later kind's facts may depend on an earlier).
    for kind in BackendKind::ALL {
        let mut sels = selectors(req.consumer, kind, v);
        for s in req.user.keys() {
            let of_kind = judge::applicable(req.consumer, v)
                .iter()
                .any(|b| &b.selector == s && b.kind == kind);
            if of_kind && !sels.contains(s) {
                sels.push(s.clone());
            }
        }
        for s in sels {
            if !order.iter().any(|(_, o)| o == &s) {
                order.push((kind, s));
            }
        }
    }
    for &arch in req.archs {
        let mut kv: Option<KvDtype> = w.checkpoint_kv;
        {
            for (kind, sel) in order.iter().cloned() {
                let user = req.user.get(&sel).filter(|x| x.as_str() != "auto");
                if user.is_none() && !always(kind, w) {
                    continue;
                }
                let mut reasons = Vec::new();
                let (value, chosen_by) = match user {
                    Some(u) => (u.clone(), ChosenBy::User),
                    None => match auto::rule(req.consumer, &sel, v, arch, w, kv, req.user) {
                        Some(rule) => {
                            reasons.push(Reason::AutoChose {
                                selector: sel.clone(),
                                value: rule.value.clone(),
                                source: rule.why.clone(),
                            });
                            (rule.value.clone(), ChosenBy::Auto)
                        }
                        None if kind == BackendKind::KvCache => {
                            let d = w.checkpoint_kv.unwrap_or(w.activation_kv());
                            let spelled = kv_spelling(req.consumer, v, &sel, d);
                            reasons.push(Reason::AutoDefault {
                                selector: sel.clone(),
                                value: spelled.clone(),
                                basis: if w.checkpoint_kv.is_some() {
                                    "the checkpoint's KV cache quantization".into()
                                } else {
                                    "the model's dtype".into()
                                },
                            });
                            (spelled, ChosenBy::Auto)
                        }
                        // No fact says what `auto` picks here: not judged, said by name.
                        None => ("auto".to_string(), ChosenBy::Auto),
                    },
                };
                if kind == BackendKind::KvCache {
                    kv = auto::kv_dtype(&value).or(kv);
                }
                if value == "auto" {
                    reasons.push(Reason::NoFacts {
                        selector: sel.clone(),
                        value: value.clone(),
                        version: v.map(|v| v.to_string()),
                    });
                } else {
                    reasons.extend(reasons_for(req, ev, &sel, &value, arch, kv));
                }
                let works = reason::works(&reasons);
                let alternatives = if works == Some(false) {
                    alternatives(req, ev, &sel, &value, arch, kv)
                } else {
                    Vec::new()
                };
                let mut install: Vec<String> = Vec::new();
                if works != Some(false) {
                    for (name, features) in reasons.iter().filter_map(Reason::install) {
                        // kiln installs no toolkit (the reason says how to get one).
                        let python = ev.set.get(name).is_some_and(|r| r.kind == crate::recipe::Kind::Python);
                        let target = if features.is_empty() {
                            name.to_string()
                        } else {
                            format!("{name}[{}]", features.join(","))
                        };
                        if python && !install.contains(&target) {
                            install.push(target);
                        }
                    }
                }
                let kind = judge::fact(req.consumer, v, &sel, &value).map_or(kind, |b| b.kind);
                out.push(Verdict {
                    selector: sel,
                    kind,
                    value,
                    chosen_by,
                    arch,
                    works,
                    reasons,
                    alternatives,
                    install,
                });
            }
        }
    }
    out
}

/// How `selector` spells KV dtype `d` in this version (`bfloat16` in vLLM, `bf16` in SGLang).
fn kv_spelling(r: &Recipe, v: Option<&Version>, selector: &Selector, d: KvDtype) -> String {
    let facts = judge::applicable(r, v);
    let spellings: Vec<&str> = facts
        .iter()
        .filter(|b| &b.selector == selector && auto::kv_dtype(&b.value) == Some(d))
        .map(|b| b.value.as_str())
        .collect();
    let exact = spellings.iter().find(|x| **x == d.as_str());
    exact.or(spellings.first()).map_or(d.to_string(), |x| x.to_string())
}

/// The answer for the whole command: no when any verdict is no, proven only when all are.
pub fn works(verdicts: &[Verdict]) -> Option<bool> {
    if verdicts.iter().any(|v| v.works == Some(false)) {
        Some(false)
    } else if verdicts.is_empty() || verdicts.iter().any(|v| v.works.is_none()) {
        None
    } else {
        Some(true)
    }
}

#[cfg(test)]
mod tests;
