//! `[[backends]]`: the runtime backends a component offers (`--moe-runner-backend marlin`), what
//! each needs (components with features, archs, a CUDA toolkit, the consumer's own CUDA binaries
//! by glob: `binaries`), for which of the consumer's versions (`versions`), and why. It
//! deliberately does not check that the needed components exist: the recipe set does.

use super::cx::{Ctx, requirement};
use super::doc::Table;
use crate::recipe::binaries::{ServedBinaries, glob_set};
use crate::recipe::model::Backend;

const KEYS: &[&str] = &["flag", "value", "needs", "arch", "cuda", "versions", "binaries", "why"];

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> Vec<Backend> {
    let mut backends = Vec::new();
    if let Some(item) = root.get("backends") {
        match item.as_array_of_tables() {
            Some(tables) => {
                for (t, header) in tables {
                    backends.extend(backend(cx, t, Some(header)));
                }
            }
            None => cx.wrong_type(item, "an array of tables ([[backends]])", "backends", ""),
        }
    }
    backends
}

fn backend(cx: &mut Ctx, t: Table<'_>, header: Option<std::ops::Range<usize>>) -> Option<Backend> {
    let section = "backends";
    cx.check_keys(t, section, KEYS);
    let flag = cx.required(t, "flag", section, header.clone());
    let value = cx.required(t, "value", section, header.clone());
    let why = cx.required(t, "why", section, header.clone());
    let mut needs = Vec::new();
    for n in cx.strings(t, "needs", section).unwrap_or_default() {
        match requirement(n.value) {
            Ok(req) if req.version_or_url.is_none() => {
                needs.push((req.name.to_string(), req.extras.iter().map(|e| e.to_string()).collect()));
            }
            _ => cx.error(
                n.span,
                format!("`{}` is not a component name with optional features", n.value),
                "e.g. \"flashinfer[cutedsl]\"",
            ),
        }
    }
    let arch = cx.archs(t, "arch", section);
    let mut cuda_req = None;
    let cuda = cx.string(t, "cuda", section).map(|c| {
        match semver::VersionReq::parse(c.value) {
            Ok(r) => cuda_req = Some(r),
            Err(e) => cx.error(
                c.span.clone(),
                format!("bad CUDA version requirement `{}`", c.value),
                e.to_string(),
            ),
        }
        c.value.to_string()
    });
    let versions = cx.string(t, "versions", section);
    let versions_spec = versions
        .as_ref()
        .and_then(|v| cx.specifiers(v, format_args!("backends.versions")));
    let binaries = binaries(cx, t, section);
    Some(Backend {
        flag: flag?.value.to_string(),
        value: value?.value.to_string(),
        needs,
        arch,
        cuda,
        cuda_req,
        why: why?.value.to_string(),
        versions: versions.map(|v| v.value.to_string()),
        versions_spec,
        binaries,
        span: header,
    })
}

/// `binaries = ["vllm/_qutlass_C*.so"]`: globs over the consumer's RECORD paths (globset
/// syntax, `*` within one directory); `None` when absent, empty or with a bad glob (reported).
fn binaries(cx: &mut Ctx, t: Table<'_>, section: &str) -> Option<ServedBinaries> {
    let files = cx.strings(t, "binaries", section)?;
    let texts: Vec<&str> = files.iter().map(|f| f.value).collect();
    if texts.is_empty() {
        cx.error(
            t.get("binaries").and_then(|i| i.span()),
            "`binaries` is empty".into(),
            "name the CUDA binaries only this backend needs (`binaries = [\"pkg/_kernels*.so\"]`), or drop the key",
        );
        return None;
    }
    match glob_set(&texts) {
        Ok(matcher) => Some(ServedBinaries {
            files: texts.iter().map(|f| f.to_string()).collect(),
            matcher,
        }),
        Err((i, e)) => {
            cx.error(
                files.get(i).and_then(|f| f.span.clone()),
                format!("bad glob `{}`: {e}", texts.get(i).copied().unwrap_or_default()),
                "use `*`, `?`, `[abc]`, `{a,b}` and `**` (globset syntax)",
            );
            None
        }
    }
}
