//! One backend value judged for one arch: first what upstream says (its kernels' archs, the
//! quantization, KV dtype and model families it serves, the conditions it refuses), then this
//! machine's evidence (the toolkit, the components it needs, the binaries that must hold the arch,
//! the JIT modules that must have compiled for it). Every reason is kept. It deliberately does not
//! choose values (`auto` is [`super::auto`]'s) nor run the engine.

use std::collections::BTreeMap;

use pep440_rs::Version;

use super::reason::Reason;
use super::workload::Workload;
use crate::arch::Arch;
use crate::probe::MachineFacts;
use crate::probe::binaries::Binaries;
use crate::probe::jit::JitOutcome;
use crate::recipe::serving::{Backend, Filters, KvDtype, Selector};
use crate::recipe::{Recipe, RecipeSet};
use crate::resolve::{Assessment, Status};

/// What this machine shows about a consumer and what it needs.
pub struct Evidence<'a> {
    pub set: &'a RecipeSet,
    pub machine: &'a MachineFacts,
    pub assessments: &'a [Assessment],
    /// CUDA binaries of the installed distributions, by normalized name.
    pub binaries: &'a BTreeMap<String, Binaries>,
    /// Where each installed distribution lives (to make RECORD-relative paths), by normalized name.
    pub locations: BTreeMap<String, String>,
    pub jit: &'a BTreeMap<String, JitOutcome>,
    /// Proofs of the JIT modules backends need (`[[backends]] jit`), by component.
    pub jit_modules: BTreeMap<String, JitOutcome>,
}

/// The backend facts of `consumer` that hold for `version` (every fact when it is unknown and
/// the fact is unscoped).
pub fn applicable<'r>(consumer: &'r Recipe, version: Option<&Version>) -> Vec<&'r Backend> {
    consumer
        .backends
        .iter()
        .filter(|b| b.serves.version_matches(version))
        .collect()
}

/// The fact for `selector`=`value` in `version`, if kiln has one.
pub fn fact<'r>(
    consumer: &'r Recipe,
    version: Option<&Version>,
    selector: &Selector,
    value: &str,
) -> Option<&'r Backend> {
    applicable(consumer, version)
        .into_iter()
        .find(|b| &b.selector == selector && b.value == value)
}

/// Whether every given filter matches.
fn matches(f: &Filters, arch: Arch, w: Option<&Workload>, kv: Option<KvDtype>) -> bool {
    (f.arch.is_empty() || f.arch.contains(&arch))
        && (f.quant.is_empty() || w.is_some_and(|w| f.quant.contains(&w.quant)))
        && (f.kv_cache.is_empty() || kv.is_some_and(|k| f.kv_cache.contains(&k)))
        && (f.models.is_empty() || w.is_some_and(|w| f.models.iter().any(|m| w.is(*m))))
}

/// What upstream says of `b` on `arch` for the workload (None: judged for any model).
pub fn upstream(b: &Backend, arch: Arch, w: Option<&Workload>, kv: Option<KvDtype>) -> Vec<Reason> {
    let source = || b.why.clone();
    let mut out = Vec::new();
    if b.arch_given && !b.serves.arch.contains(&arch) {
        out.push(Reason::ArchNotServed {
            value: b.value.clone(),
            arch,
            runs_on: b.serves.arch.clone(),
            source: source(),
        });
    }
    if let Some(w) = w {
        if !b.serves.quant.is_empty() && !b.serves.quant.contains(&w.quant) {
            out.push(Reason::QuantNotServed {
                value: b.value.clone(),
                quant: w.quant,
                serves: b.serves.quant.clone(),
                source: source(),
            });
        }
        if !b.serves.models.is_empty() && !b.serves.models.iter().any(|m| w.is(*m)) {
            out.push(Reason::FamilyNotServed {
                value: b.value.clone(),
                families: w.families.clone(),
                serves: b.serves.models.clone(),
                source: source(),
            });
        }
    }
    if let Some(k) = kv
        && !b.serves.kv_cache.is_empty()
        && !b.serves.kv_cache.contains(&k)
    {
        out.push(Reason::KvNotServed {
            value: b.value.clone(),
            kv_cache: k,
            serves: b.serves.kv_cache.clone(),
            source: source(),
        });
    }
    for r in &b.refuse {
        // Without a workload, a refusal that needs one does not apply (doctor shows it per scheme).
        let needs_workload = !r.when.quant.is_empty() || !r.when.models.is_empty();
        let needs_kv = !r.when.kv_cache.is_empty();
        if (needs_workload && w.is_none()) || (needs_kv && kv.is_none()) {
            continue;
        }
        if matches(&r.when, arch, w, kv) {
            out.push(Reason::Refused {
                value: b.value.clone(),
                arch,
                quant: (!r.when.quant.is_empty()).then(|| w.map(|w| w.quant)).flatten(),
                kv_cache: (!r.when.kv_cache.is_empty()).then_some(kv).flatten(),
                family: r.when.models.iter().find(|m| w.is_some_and(|w| w.is(**m))).copied(),
                source: r.why.clone(),
            });
        }
    }
    if out.is_empty() {
        out.push(Reason::Serves {
            value: b.value.clone(),
            arch,
            source: source(),
        });
    }
    out
}

/// What this machine shows for `b` (of `consumer`) on `arch`.
pub fn here(ev: &Evidence, consumer: &Recipe, b: &Backend, arch: Arch) -> Vec<Reason> {
    let mut out = Vec::new();
    if let Some(req) = &b.cuda_req {
        let needs = b.cuda.clone().unwrap_or_default();
        match &ev.machine.cuda_toolkit {
            None => out.push(Reason::NoToolkit {
                value: b.value.clone(),
                needs,
                source: b.why.clone(),
            }),
            Some(tk) if !req.matches(&tk.version) => out.push(Reason::ToolkitTooOld {
                value: b.value.clone(),
                needs,
                have: tk.version.to_string(),
                source: b.why.clone(),
            }),
            _ => {}
        }
    }
    let by_name: BTreeMap<&str, &Assessment> = ev.assessments.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut pieces: Vec<(String, Vec<String>)> = vec![(consumer.name.clone(), Vec::new())];
    for n in &b.needs {
        if !pieces.iter().any(|p| p == n) {
            pieces.push(n.clone());
        }
    }
    let before = out.len();
    for (need, feats) in &pieces {
        match by_name.get(need.as_str()) {
            Some(a) if a.status == Status::Ok => {
                for f in feats {
                    if let Some(x) = a.features.iter().find(|x| &x.name == f && x.status != Status::Ok) {
                        out.push(Reason::FeatureNotOk {
                            component: need.clone(),
                            feature: f.clone(),
                            status: x.status,
                        });
                    }
                }
            }
            Some(a) => out.push(Reason::ComponentNotOk {
                component: need.clone(),
                features: feats.clone(),
                status: a.status,
            }),
            None => out.push(Reason::ComponentNotOk {
                component: need.clone(),
                features: feats.clone(),
                status: Status::Missing,
            }),
        }
    }
    if out.len() == before {
        out.push(Reason::ComponentsOk {
            components: pieces.iter().map(|(n, _)| n.clone()).collect(),
        });
    }
    if let Some(served) = &b.binaries {
        out.extend(binaries(ev, consumer, served, arch));
    }
    for (component, kernel) in &b.jit {
        let proven = match ev.jit.get(component) {
            Some(JitOutcome::Ran(p)) if p.ok => p.kernels.iter().any(|k| {
                (&k.kernel == kernel || k.asked.as_ref() == Some(kernel)) && k.files.iter().any(|f| runs(ev, f, arch))
            }),
            _ => false,
        };
        let (component, kernel) = (component.clone(), kernel.clone());
        out.push(if proven {
            Reason::JitProven {
                component,
                kernel,
                arch,
            }
        } else {
            Reason::JitNotProven {
                component,
                kernel,
                arch,
            }
        });
    }
    out
}

/// The binaries of the consumer's distribution that `b` names, judged for `arch`.
fn binaries(
    ev: &Evidence,
    consumer: &Recipe,
    served: &crate::recipe::binaries::ServedBinaries,
    arch: Arch,
) -> Vec<Reason> {
    let dist = crate::probe::normalize(consumer.dist.as_deref().unwrap_or(&consumer.name));
    let (Some(bins), Some(loc)) = (ev.binaries.get(&dist), ev.locations.get(&dist)) else {
        return vec![Reason::BinariesNotRead {
            globs: served.files.clone(),
        }];
    };
    let mut held = Vec::new();
    let mut out = Vec::new();
    for f in &bins.cuda {
        let rel = std::path::Path::new(&f.path)
            .strip_prefix(loc)
            .map_or(f.path.clone(), |p| p.display().to_string());
        if !served.names(&rel) {
            continue;
        }
        if runs(ev, f, arch) {
            held.push(rel);
        } else {
            out.push(Reason::BinaryLacksArch { binary: rel, arch });
        }
    }
    if out.is_empty() {
        if held.is_empty() {
            out.push(Reason::BinariesNotRead {
                globs: served.files.clone(),
            });
        } else {
            out.push(Reason::BinariesHold { binaries: held, arch });
        }
    }
    out
}

/// Whether a file holds an image that loads on `arch` under this machine's driver (run rules).
fn runs(ev: &Evidence, f: &crate::fatbin::FileReport, arch: Arch) -> bool {
    let driver = ev.machine.driver_cuda.as_ref().map(|d| &d.value);
    crate::arch::run::runs_on(&crate::probe::binaries::kernel_images(f), arch, driver).usable
}
