//! `[[limits]]`: what a library's API cannot do on some archs (see `recipe::limits`), each entry
//! with `arch`, `lacks` (a closed vocabulary), optional `versions` and `why`. It deliberately
//! does not check that the archs are ones the component otherwise supports.

use std::ops::Range;

use super::cx::Ctx;
use super::doc::Table;
use crate::recipe::limits::{Capability, Limit};

const KEYS: &[&str] = &["arch", "lacks", "versions", "why"];

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> Vec<Limit> {
    let mut out = Vec::new();
    let Some(item) = root.get("limits") else {
        return out;
    };
    match item.as_array_of_tables() {
        Some(tables) => {
            for (t, header) in tables {
                out.extend(one(cx, t, Some(header)));
            }
        }
        None => cx.wrong_type(item, "an array of tables ([[limits]])", "limits", ""),
    }
    out
}

fn one(cx: &mut Ctx, t: Table<'_>, header: Option<Range<usize>>) -> Option<Limit> {
    let section = "limits";
    cx.check_keys(t, section, KEYS);
    let why = cx.required(t, "why", section, header.clone());
    let arch = cx.archs(t, "arch", section).unwrap_or_default();
    if arch.is_empty() {
        cx.error(
            header.clone(),
            "a [[limits]] needs `arch`: the target archs on which the API lacks something".into(),
            "add `arch = [\"12.0\"]`",
        );
    }
    let mut lacks = Vec::new();
    for c in cx.strings(t, "lacks", section).unwrap_or_default() {
        match c.value.parse::<Capability>() {
            Ok(x) => lacks.push(x),
            Err(e) => cx.error(c.span, e, "name what the API lacks on those archs"),
        }
    }
    if lacks.is_empty() {
        cx.error(
            header.clone(),
            "a [[limits]] needs `lacks`: what the API cannot do on those archs".into(),
            "add `lacks = [\"paged-kv\"]`",
        );
    }
    let versions = cx.string(t, "versions", section);
    let versions_spec = versions
        .as_ref()
        .and_then(|v| cx.specifiers(v, format_args!("limits.versions")));
    if arch.is_empty() || lacks.is_empty() {
        return None;
    }
    Some(Limit {
        arch,
        lacks,
        versions: versions.map(|v| v.value.to_string()),
        versions_spec,
        why: why?.value.to_string(),
        span: header,
    })
}
