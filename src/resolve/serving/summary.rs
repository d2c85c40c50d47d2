//! `doctor`'s backends section: every backend fact of each consumer in scope that holds for its
//! installed version (every fact when it is not installed), judged per target arch without a
//! model — where its kernels run and what this machine shows — and, per arch, the weight schemes
//! it serves and those it refuses there. Facts that need a model (a refusal for a family or a KV
//! dtype) are left to `kiln check`.

use pep440_rs::Version;
use serde::Serialize;

use super::judge::{self, Evidence};
use super::reason::{self, Reason};
use crate::arch::Arch;
use crate::recipe::serving::{Backend, BackendKind, Quant, Selector};

/// One backend value of one consumer on one arch.
#[derive(Debug, Clone, Serialize)]
pub struct BackendSummary {
    pub component: String,
    /// The consumer version the facts are for (installed, else planned).
    pub version: Option<String>,
    pub selector: Selector,
    pub kind: BackendKind,
    pub value: String,
    pub arch: Option<Arch>,
    pub works: Option<bool>,
    /// Rendered beside their text by `report/` (`doctor --json` carries them there).
    #[serde(skip)]
    pub reasons: Vec<Reason>,
    /// Schemes it serves on this arch (empty with `any_quant`: it does not depend on one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub serves: Vec<Quant>,
    /// Schemes upstream refuses on this arch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refuses: Vec<Quant>,
    pub any_quant: bool,
}

/// The schemes `b` serves on `arch`, and those it refuses there (refusals for a scheme alone).
fn schemes(b: &Backend, arch: Arch) -> (Vec<Quant>, Vec<Quant>, bool) {
    let candidates: Vec<Quant> = if b.serves.quant.is_empty() {
        Quant::ALL.to_vec()
    } else {
        b.serves.quant.clone()
    };
    let refused = |q: &Quant| {
        b.refuse.iter().any(|r| {
            r.when.quant.contains(q)
                && (r.when.arch.is_empty() || r.when.arch.contains(&arch))
                && r.when.kv_cache.is_empty()
                && r.when.models.is_empty()
        })
    };
    let refuses: Vec<Quant> = candidates.iter().filter(|q| refused(q)).copied().collect();
    let any = b.serves.quant.is_empty() && refuses.is_empty();
    let serves = if any {
        Vec::new()
    } else {
        candidates.into_iter().filter(|q| !refuses.contains(q)).collect()
    };
    (serves, refuses, any)
}

/// The summaries for `consumers` (name, installed version) on `archs`.
pub fn summaries(ev: &Evidence, consumers: &[(String, Option<Version>)], archs: &[Arch]) -> Vec<BackendSummary> {
    let mut out = Vec::new();
    for (name, version) in consumers {
        let Some(r) = ev.set.get(name) else { continue };
        for b in judge::applicable(r, version.as_ref()) {
            if archs.is_empty() {
                out.push(BackendSummary {
                    component: r.name.clone(),
                    version: version.as_ref().map(|v| v.to_string()),
                    selector: b.selector.clone(),
                    kind: b.kind,
                    value: b.value.clone(),
                    arch: None,
                    works: None,
                    reasons: vec![Reason::NoTargetArch],
                    serves: Vec::new(),
                    refuses: Vec::new(),
                    any_quant: true,
                });
                continue;
            }
            for &arch in archs {
                let mut reasons = judge::upstream(b, arch, None, None);
                if reason::works(&reasons) != Some(false) {
                    reasons.extend(judge::here(ev, r, b, arch));
                }
                let (serves, refuses, any_quant) = schemes(b, arch);
                out.push(BackendSummary {
                    component: r.name.clone(),
                    version: version.as_ref().map(|v| v.to_string()),
                    selector: b.selector.clone(),
                    kind: b.kind,
                    value: b.value.clone(),
                    arch: Some(arch),
                    works: reason::works(&reasons),
                    reasons,
                    serves,
                    refuses,
                    any_quant,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.component, a.kind, a.arch).cmp(&(&b.component, b.kind, b.arch)));
    out
}
