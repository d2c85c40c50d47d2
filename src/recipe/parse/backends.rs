//! `[[backends]]`: the runtime backends a component offers (`--moe-runner-backend marlin`), what
//! each needs (components with features, archs, a CUDA toolkit) and why. It deliberately does
//! not check that the needed components exist: the recipe set does.

use super::cx::{Ctx, requirement};
use super::doc::Table;
use crate::recipe::model::Backend;

const KEYS: &[&str] = &["flag", "value", "needs", "arch", "cuda", "why"];

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
    Some(Backend {
        flag: flag?.value.to_string(),
        value: value?.value.to_string(),
        needs,
        arch,
        cuda,
        cuda_req,
        why: why?.value.to_string(),
        span: header,
    })
}
