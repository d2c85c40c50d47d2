//! `[runtime]` and `[aot]`: what a component reads when it runs (its JIT's arch list, jobs and
//! threads, as `env` templates) and the modules `kiln install --aot` compiles ahead of time (a
//! script, its environment and the module names). Variable names are checked here; a template
//! that names what exists only during a build (`{src}`, `{wheel_dir}`) is an error, since a
//! serving process has neither. It deliberately does not read the AOT script (the recipe set
//! does, with the other scripts) nor render anything (the plan does, for the target archs).

use std::collections::BTreeMap;

use super::cx::Ctx;
use super::doc::Table;
use crate::recipe::model::{Aot, Jit};
use crate::recipe::template::{Part, Template, Var};

const RUNTIME: &[&str] = &["env"];
const AOT: &[&str] = &["script", "env", "modules", "on_request"];

/// `[runtime] env`: environment variable name -> template.
pub(super) fn env(cx: &mut Ctx, root: Table<'_>) -> BTreeMap<String, Template> {
    let Some(t) = cx.table(root, "runtime", "") else {
        return BTreeMap::new();
    };
    cx.check_keys(t, "runtime", RUNTIME);
    match cx.table(t, "env", "runtime") {
        Some(env) => checked_env(cx, env, "runtime.env"),
        None => BTreeMap::new(),
    }
}

/// `[aot]`: the script, its environment and the modules it compiles.
pub(super) fn aot(cx: &mut Ctx, root: Table<'_>) -> Option<Aot> {
    let t = cx.table(root, "aot", "")?;
    cx.check_keys(t, "aot", AOT);
    let header = root.get("aot").and_then(|i| i.span());
    let env = match cx.table(t, "env", "aot") {
        Some(env) => checked_env(cx, env, "aot.env"),
        None => BTreeMap::new(),
    };
    let modules = module_names(cx, t, "modules");
    if modules.is_empty() && t.contains("modules") {
        cx.error(
            t.get("modules").and_then(|i| i.span()),
            "`aot.modules` must not be empty".into(),
            "name the modules to precompile, or remove [aot]",
        );
    }
    let on_request = module_names(cx, t, "on_request");
    for m in on_request.iter().filter(|m| modules.contains(m)) {
        cx.error(
            t.get("on_request").and_then(|i| i.span()),
            format!("`{m}` is in both `aot.modules` and `aot.on_request`"),
            "`modules` are always compiled; `on_request` only with `--aot-module`: keep it in one",
        );
    }
    let script = cx.required(t, "script", "aot", header)?;
    Some(Aot {
        script: Jit {
            path: script.value.to_string(),
            text: String::new(),
            span: script.span,
            env,
        },
        modules,
        on_request,
    })
}

/// The module names in `aot.<key>`: letters, digits, `_`, `-` and `.`.
fn module_names(cx: &mut Ctx, t: Table<'_>, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for m in cx.strings(t, key, "aot").unwrap_or_default() {
        let ok = !m.value.is_empty()
            && m.value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            out.push(m.value.to_string());
        } else {
            cx.error(
                m.span,
                format!("`{}` is not a module name", m.value),
                "letters, digits, `_`, `-` and `.` only, e.g. `silu_and_mul`",
            );
        }
    }
    out
}

/// A table of `NAME = "template"` whose names are environment variable names and whose
/// templates name only what a running process has.
fn checked_env(cx: &mut Ctx, t: Table<'_>, section: &str) -> BTreeMap<String, Template> {
    let spans: BTreeMap<String, _> = t
        .entries()
        .into_iter()
        .map(|e| (e.key.to_string(), (e.key_span.clone(), e.item.span())))
        .collect();
    let env = super::build::templates(cx, t, section);
    let mut out = BTreeMap::new();
    for (k, v) in env {
        let (key_span, value_span) = spans.get(&k).cloned().unwrap_or((0..0, None));
        let name_ok = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            cx.error(
                Some(key_span),
                format!("`{k}` is not an environment variable name"),
                "letters, digits and `_`, not starting with a digit",
            );
            continue;
        }
        let build_only = v.parts().iter().find_map(|p| match p {
            Part::Var(Var::Src) => Some("src"),
            Part::Var(Var::WheelDir) => Some("wheel_dir"),
            _ => None,
        });
        if let Some(name) = build_only {
            cx.error(
                value_span,
                format!("`{{{name}}}` exists only while a wheel builds, not when {section} is read"),
                "use {python}, {jobs}, {version}, {cuda_home} or {arch.*}",
            );
            continue;
        }
        out.insert(k, v);
    }
    out
}
