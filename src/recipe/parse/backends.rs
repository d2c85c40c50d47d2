//! `[[backends]]` (with `[[backends.refuse]]`), `[[auto]]` and `[serving]`: the serving facts of
//! a consumer (see [`crate::recipe::serving`]). Every value is checked against its vocabulary
//! where it is written. It deliberately does not check that the needed components exist (the
//! recipe set does) nor that two facts of one value overlap in versions (the set's check does).

use std::ops::Range;

use super::cx::{Ctx, requirement};
use super::doc::Table;
use crate::recipe::binaries::{ServedBinaries, glob_set};
use crate::recipe::serving::{
    AutoRule, Backend, BackendKind, ChoicesAt, Family, Filters, KvDtype, Quant, Refusal, Selector, Serving,
};

const KEYS: &[&str] = &[
    "flag", "env", "value", "kind", "versions", "needs", "arch", "cuda", "quant", "kv_cache", "models", "binaries",
    "jit", "refuse", "why",
];
const FILTERS: &[&str] = &["versions", "arch", "quant", "kv_cache", "models"];
const SERVING: &[&str] = &["entry", "model_flags", "model_positional", "choices"];

/// Every array of tables under `key` in `t`, each with its header's span.
fn tables<'t>(cx: &mut Ctx, t: Table<'t>, key: &str, section: &str) -> Vec<(Table<'t>, Range<usize>)> {
    let Some(item) = t.get(key) else {
        return Vec::new();
    };
    match item.as_array_of_tables() {
        Some(ts) => ts.collect(),
        None => {
            let full = if section.is_empty() {
                key.to_string()
            } else {
                format!("{section}.{key}")
            };
            cx.wrong_type(item, &format!("an array of tables ([[{full}]])"), key, section);
            Vec::new()
        }
    }
}

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> (Vec<Backend>, Serving) {
    let backends = tables(cx, root, "backends", "")
        .into_iter()
        .filter_map(|(t, h)| backend(cx, t, Some(h)))
        .collect();
    let mut serving = Serving {
        auto: tables(cx, root, "auto", "")
            .into_iter()
            .filter_map(|(t, h)| auto(cx, t, Some(h)))
            .collect(),
        ..Serving::default()
    };
    if let Some(s) = cx.table(root, "serving", "") {
        cx.check_keys(s, "serving", SERVING);
        for e in cx.strings(s, "entry", "serving").unwrap_or_default() {
            let words: Vec<String> = e.value.split_whitespace().map(str::to_string).collect();
            if words.is_empty() {
                cx.error(e.span, "an empty serving entry".into(), "e.g. \"vllm serve\"");
            } else {
                serving.entry.push(words);
            }
        }
        serving.model_flags = cx
            .strings(s, "model_flags", "serving")
            .unwrap_or_default()
            .iter()
            .map(|f| f.value.to_string())
            .collect();
        serving.model_positional = cx.bool(s, "model_positional", "serving").unwrap_or(false);
        serving.choices = tables(cx, s, "choices", "serving")
            .into_iter()
            .filter_map(|(t, h)| choices(cx, t, Some(h)))
            .collect();
    }
    (backends, serving)
}

/// `flag = "..."` or `env = "..."`, exactly one.
fn selector(cx: &mut Ctx, t: Table<'_>, section: &str, header: Option<Range<usize>>) -> Option<Selector> {
    match (cx.string(t, "flag", section), cx.string(t, "env", section)) {
        (Some(f), None) => {
            if !f.value.starts_with('-') {
                cx.error(
                    f.span,
                    format!("flag `{}` does not start with `-`", f.value),
                    "write the flag as the engine spells it, e.g. `--moe-runner-backend`",
                );
                return None;
            }
            Some(Selector::Flag(f.value.to_string()))
        }
        (None, Some(e)) => Some(Selector::Env(e.value.to_string())),
        (Some(_), Some(e)) => {
            cx.error(
                e.span,
                format!("[{section}] has both `flag` and `env`"),
                "a value is chosen by one of them: keep one",
            );
            None
        }
        (None, None) => {
            cx.error(
                header,
                format!("missing key `{section}.flag` (or `{section}.env`)"),
                format!("add `flag = \"--...\"` (or `env = \"VAR\"`) to [[{section}]]"),
            );
            None
        }
    }
}

/// A list of vocabulary words, each bad one reported where it is written.
fn words<T: std::str::FromStr<Err = String>>(cx: &mut Ctx, t: Table<'_>, key: &str, section: &str) -> Vec<T> {
    let mut out = Vec::new();
    for w in cx.strings(t, key, section).unwrap_or_default() {
        match w.value.parse::<T>() {
            Ok(v) => out.push(v),
            Err(e) => cx.error(w.span, format!("`{section}.{key}`: {e}"), "use one of the listed words"),
        }
    }
    out
}

fn filters(cx: &mut Ctx, t: Table<'_>, section: &str) -> Filters {
    let versions = cx.string(t, "versions", section);
    let versions_spec = versions
        .as_ref()
        .and_then(|v| cx.specifiers(v, format_args!("{section}.versions")));
    Filters {
        versions: versions.map(|v| v.value.to_string()),
        versions_spec,
        arch: cx.archs(t, "arch", section).unwrap_or_default(),
        quant: words::<Quant>(cx, t, "quant", section),
        kv_cache: words::<KvDtype>(cx, t, "kv_cache", section),
        models: words::<Family>(cx, t, "models", section),
    }
}

fn kind(cx: &mut Ctx, t: Table<'_>, section: &str, header: Option<Range<usize>>) -> Option<BackendKind> {
    let all: Vec<&str> = BackendKind::ALL.iter().map(|x| x.as_str()).collect();
    if !t.contains("kind") {
        cx.error(
            header,
            format!("missing key `{section}.kind`"),
            format!("add `kind = \"...\"` to [[{section}]], one of {}", all.join(", ")),
        );
        return None;
    }
    let k = cx.string(t, "kind", section)?;
    let found = BackendKind::ALL.iter().find(|x| x.as_str() == k.value).copied();
    if found.is_none() {
        cx.error(
            k.span,
            format!("unknown backend kind `{}`", k.value),
            format!("use one of {}", all.join(", ")),
        );
    }
    found
}

fn backend(cx: &mut Ctx, t: Table<'_>, header: Option<Range<usize>>) -> Option<Backend> {
    let section = "backends";
    cx.check_keys(t, section, KEYS);
    let selector = selector(cx, t, section, header.clone());
    let value = cx.required(t, "value", section, header.clone());
    let why = cx.required(t, "why", section, header.clone());
    let kind = kind(cx, t, section, header.clone());
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
    let arch_given = t.contains("arch");
    let serves = filters(cx, t, section);
    let cuda_at = cx.string(t, "cuda", section);
    let cuda_req = cuda_at.as_ref().and_then(|c| cx.semver_req(c, "backends.cuda"));
    let files = cx.strings(t, "binaries", section).unwrap_or_default();
    let texts: Vec<&str> = files.iter().map(|f| f.value).collect();
    let binaries = if texts.is_empty() {
        None
    } else {
        match glob_set(&texts) {
            Ok(matcher) => Some(ServedBinaries {
                files: texts.iter().map(|s| s.to_string()).collect(),
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
    };
    let mut jit = Vec::new();
    for j in cx.strings(t, "jit", section).unwrap_or_default() {
        match j.value.split_once(':') {
            Some((c, k)) if !c.is_empty() && !k.is_empty() => jit.push((c.to_string(), k.to_string())),
            _ => cx.error(
                j.span,
                format!("`{}` is not `component:kernel`", j.value),
                "e.g. \"flashinfer:fused_moe_cutlass_sm120\"",
            ),
        }
    }
    let mut refuse = Vec::new();
    for (rt, rh) in tables(cx, t, "refuse", section) {
        let rs = "backends.refuse";
        let mut allowed = FILTERS.to_vec();
        allowed.push("why");
        cx.check_keys(rt, rs, &allowed);
        let why = cx.required(rt, "why", rs, Some(rh));
        let when = filters(cx, rt, rs);
        if let Some(why) = why {
            refuse.push(Refusal {
                when,
                why: why.value.to_string(),
            });
        }
    }
    Some(Backend {
        selector: selector?,
        value: value?.value.to_string(),
        kind: kind?,
        serves,
        arch_given,
        needs,
        cuda: cuda_at.map(|c| c.value.to_string()),
        cuda_req,
        binaries,
        jit,
        refuse,
        why: why?.value.to_string(),
        span: header,
    })
}

fn auto(cx: &mut Ctx, t: Table<'_>, header: Option<Range<usize>>) -> Option<AutoRule> {
    let section = "auto";
    let mut allowed = FILTERS.to_vec();
    allowed.extend(["flag", "env", "value", "why", "flags"]);
    cx.check_keys(t, section, &allowed);
    let mut flags = Vec::new();
    if let Some(ft) = cx.table(t, "flags", section) {
        for e in ft.entries() {
            match e.item.as_str() {
                Some(v) if e.key.starts_with('-') => flags.push((e.key.to_string(), v.to_string())),
                Some(_) => cx.error(
                    Some(e.key_span),
                    format!("`auto.flags`: `{}` is not a flag", e.key),
                    "write the flag as the engine spells it: `flags = { \"--quantization\" = \"modelopt_fp4\" }`",
                ),
                None => cx.wrong_type(e.item, "a string", e.key, "auto.flags"),
            }
        }
    }
    let selector = selector(cx, t, section, header.clone());
    let value = cx.required(t, "value", section, header.clone());
    let why = cx.required(t, "why", section, header.clone());
    let when = filters(cx, t, section);
    Some(AutoRule {
        selector: selector?,
        when,
        flags,
        value: value?.value.to_string(),
        why: why?.value.to_string(),
        span: header,
    })
}

fn choices(cx: &mut Ctx, t: Table<'_>, header: Option<Range<usize>>) -> Option<ChoicesAt> {
    let section = "serving.choices";
    cx.check_keys(t, section, &["flag", "env", "versions", "file", "name", "members"]);
    let members = cx.string(t, "members", section);
    let member_names = match members.as_ref().map(|m| m.value) {
        None | Some("values") => false,
        Some("names") => true,
        Some(other) => {
            cx.error(
                members.and_then(|m| m.span),
                format!("`members = \"{other}\"`: expected \"names\" or \"values\""),
                "\"names\" when the command line takes the enum members' names",
            );
            false
        }
    };
    let selector = selector(cx, t, section, header.clone());
    let file = cx.required(t, "file", section, header.clone());
    let name = cx.required(t, "name", section, header);
    let when = filters(cx, t, section);
    Some(ChoicesAt {
        selector: selector?,
        when,
        file: file?.value.to_string(),
        name: name?.value.to_string(),
        member_names,
    })
}
