//! Serving reasons and verdicts as text: one sentence per typed reason, the word for a verdict
//! (`works`, `no`, `not proven`), and `doctor`'s backends section grouped by consumer, arch and
//! kind. It renders only; every decision was made in `resolve::serving`.

use serde::Serialize;

use crate::recipe::serving::{Quant, Selector};
use crate::resolve::serving::reason::Reason;
use crate::resolve::serving::summary::BackendSummary;

fn list<T: ToString>(xs: &[T]) -> String {
    xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

fn selector(s: &Selector) -> String {
    match s {
        Selector::Flag(f) => f.clone(),
        Selector::Env(e) => format!("${e}"),
    }
}

/// One reason as a sentence (its source is rendered beside it, see [`Rendered`]).
pub fn text(r: &Reason) -> String {
    use Reason::*;
    match r {
        ArchNotServed {
            value, arch, runs_on, ..
        } if runs_on.is_empty() => {
            format!("{value}: its kernels do not run on {arch} (not on NVIDIA GPUs)")
        }
        ArchNotServed {
            value, arch, runs_on, ..
        } => {
            format!(
                "{value}: its kernels do not run on {arch} (they run on {})",
                list(runs_on)
            )
        }
        Refused {
            value,
            arch,
            quant,
            kv_cache,
            family,
            ..
        } => {
            let mut what = Vec::new();
            if let Some(q) = quant {
                what.push(format!("{q} checkpoints"));
            }
            if let Some(k) = kv_cache {
                what.push(format!("a {k} KV cache"));
            }
            if let Some(f) = family {
                what.push(format!("{f} models"));
            }
            if what.is_empty() {
                format!("{value} is refused on {arch}")
            } else {
                format!("{value} is refused on {arch} for {}", what.join(" with "))
            }
        }
        QuantNotServed {
            value, quant, serves, ..
        } => {
            format!(
                "{value} does not serve {quant} checkpoints (it serves {})",
                list(serves)
            )
        }
        KvNotServed {
            value,
            kv_cache,
            serves,
            ..
        } => format!(
            "{value} does not serve a {kv_cache} KV cache (it serves {})",
            list(serves)
        ),
        FamilyNotServed {
            value,
            families,
            serves,
            ..
        } => format!(
            "{value} does not serve this model ({}; it serves {})",
            list(families),
            list(serves)
        ),
        NotAChoice {
            selector: s,
            value,
            choices,
            ..
        } => format!(
            "the installed engine does not accept `{value}` for {} (it accepts {})",
            selector(s),
            list(choices)
        ),
        NoToolkit { value, needs, .. } => format!(
            "{value} compiles kernels at run time and needs a CUDA toolkit {needs}; none found (install one and set CUDA_HOME; kiln does not install it)"
        ),
        ToolkitTooOld { value, needs, have, .. } => {
            format!("{value} needs CUDA {needs} at run time; the toolkit here is {have}")
        }
        ComponentNotOk {
            component,
            features,
            status,
        } => {
            let label = if features.is_empty() {
                component.clone()
            } else {
                format!("{component}[{}]", features.join(","))
            };
            format!("needs {label}, which is {} here", status.as_str())
        }
        FeatureNotOk {
            component,
            feature,
            status,
        } => format!(
            "needs {component}[{feature}], whose imports are {} here",
            status.as_str()
        ),
        BinaryLacksArch { binary, arch } => format!("{binary} holds no kernel image that loads on {arch}"),
        BinariesNotRead { globs } => format!("its binaries ({}) are not installed here to be read", list(globs)),
        JitNotProven {
            component,
            kernel,
            arch,
        } => format!(
            "{component}'s JIT module {kernel} has not been compiled for {arch} here (`kiln check --prove-jit` compiles it)"
        ),
        NoFacts {
            selector: s,
            value,
            version,
        } => format!(
            "kiln has no facts for {} {value}{}: not judged",
            selector(s),
            version.as_ref().map(|v| format!(" in version {v}")).unwrap_or_default()
        ),
        NoTargetArch => "no target arch: no GPU found and no --arch given".into(),
        AutoChose { selector: s, value, .. } => format!("{} auto resolves to {value}", selector(s)),
        AutoDefault {
            selector: s,
            value,
            basis,
        } => format!("{} auto: {value}, from {basis}", selector(s)),
        Serves { value, arch, .. } => format!("{value} runs on {arch}"),
        ComponentsOk { components } => format!("{} ok here", list(components)),
        BinariesHold { binaries, arch } => format!(
            "{} hold{} kernels for {arch}",
            list(binaries),
            if binaries.len() == 1 { "s" } else { "" }
        ),
        JitProven {
            component,
            kernel,
            arch,
        } => format!("{component}'s JIT module {kernel} compiled for {arch} here"),
    }
}

/// A reason as JSON consumers read it: the typed fields, the sentence and the source.
#[derive(Serialize)]
pub struct Rendered<'a> {
    #[serde(flatten)]
    pub reason: &'a Reason,
    pub text: String,
    pub source: Option<&'a str>,
}

pub fn rendered(reasons: &[Reason]) -> Vec<Rendered<'_>> {
    reasons
        .iter()
        .map(|r| Rendered {
            reason: r,
            text: text(r),
            source: r.source(),
        })
        .collect()
}

/// A reason with its source, for the terminal.
pub fn with_source(r: &Reason) -> String {
    match r.source() {
        Some(s) if !s.is_empty() => format!("{}: {s}", text(r)),
        _ => text(r),
    }
}

/// The word for a verdict.
pub fn word(works: Option<bool>) -> &'static str {
    match works {
        Some(true) => "works",
        Some(false) => "no",
        None => "not proven",
    }
}

/// `serves bf16, fp8; not nvfp4` for a summary line.
fn schemes(b: &BackendSummary) -> Option<String> {
    if b.any_quant {
        return None;
    }
    let mut out = format!("serves {}", list(&b.serves));
    if !b.refuses.is_empty() {
        out += &format!("; not {}", list::<Quant>(&b.refuses));
    }
    Some(out)
}

/// `doctor`'s backends section.
pub fn doctor_section(backends: &[BackendSummary]) {
    if backends.is_empty() {
        return;
    }
    println!();
    println!("backends");
    let w = backends.iter().map(|b| b.value.len()).max().unwrap_or(0);
    let mut last: Option<(&str, Option<crate::arch::Arch>, &str)> = None;
    for b in backends {
        let head = (b.component.as_str(), b.arch, b.kind.as_str());
        if last != Some(head) {
            let on = b.arch.map(|a| format!(" on {a}")).unwrap_or_default();
            let version = b.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
            println!(
                "  {}{version} {} ({}){on}",
                b.component,
                b.kind.as_str(),
                selector(&b.selector)
            );
            last = Some(head);
        }
        let against: Vec<String> = b
            .reasons
            .iter()
            .filter(|r| r.effect() != crate::resolve::serving::reason::Effect::Proof)
            .map(|r| {
                if r.effect() == crate::resolve::serving::reason::Effect::No {
                    with_source(r)
                } else {
                    text(r)
                }
            })
            .collect();
        let mut detail: Vec<String> = Vec::new();
        if b.works != Some(false) {
            detail.extend(schemes(b));
        }
        detail.extend(against);
        println!("    {:w$}  {:10}  {}", b.value, word(b.works), detail.join("; "));
    }
}
