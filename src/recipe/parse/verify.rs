//! `[verify]` and `[features.*]`: the imports and smoke script that prove a component works, and
//! the optional parts of a component with their own dependencies and imports, and the JIT proof
//! script with its environment. It deliberately does not read the scripts: the recipe set does,
//! with the other files.

use std::collections::BTreeMap;

use super::cx::Ctx;
use super::depends;
use super::doc::Table;
use crate::recipe::model::{Feature, Jit, Smoke};

const KEYS: &[&str] = &["imports", "smoke", "serve", "jit", "jit_env"];
const FEATURE: &[&str] = &["summary", "depends", "imports"];

/// What `[verify]` says: the imports, and the smoke script's name.
pub(super) struct Verify {
    pub imports: Vec<String>,
    pub smoke: Option<Smoke>,
    pub jit: Option<Jit>,
}

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> Verify {
    let mut out = Verify {
        imports: Vec::new(),
        smoke: None,
        jit: None,
    };
    if let Some(v) = cx.table(root, "verify", "") {
        cx.check_keys(v, "verify", KEYS);
        out.imports = module_names(cx, v, "verify");
        // The script itself is read with the rest of the set (embedded or from the directory).
        out.smoke = cx.string(v, "smoke", "verify").map(|s| Smoke {
            path: s.value.to_string(),
            text: String::new(),
            span: s.span,
            serve: false,
        });
        // A serving proof is the strongest smoke test: one script proves both.
        if let Some(s) = cx.string(v, "serve", "verify") {
            if out.smoke.is_some() {
                cx.error(
                    s.span.clone(),
                    "both `smoke` and `serve`".into(),
                    "a serving proof runs the component's kernels too: keep `serve` and fold the smoke test's checks into it, or drop `serve`",
                );
            }
            out.smoke = Some(Smoke {
                path: s.value.to_string(),
                text: String::new(),
                span: s.span,
                serve: true,
            });
        }
        let env = match cx.table(v, "jit_env", "verify") {
            Some(t) => super::build::templates(cx, t, "verify.jit_env"),
            None => Default::default(),
        };
        out.jit = match cx.string(v, "jit", "verify") {
            Some(s) => Some(Jit {
                path: s.value.to_string(),
                text: String::new(),
                span: s.span,
                env,
            }),
            None if !env.is_empty() => {
                cx.error(
                    v.get("jit_env").and_then(|i| i.span()),
                    "`jit_env` without `jit`".into(),
                    "name the JIT proof script with `jit = \"jit/NAME.py\"`, or drop `jit_env`",
                );
                None
            }
            None => None,
        };
    }
    out
}

pub(super) fn features(cx: &mut Ctx, root: Table<'_>) -> BTreeMap<String, Feature> {
    let mut features = BTreeMap::new();
    let Some(fs) = cx.table(root, "features", "") else {
        return features;
    };
    for e in fs.entries() {
        let section = format!("features.{}", e.key);
        let Some(f) = e.item.as_table() else {
            cx.wrong_type(e.item, "a table", e.key, "features");
            continue;
        };
        cx.check_keys(f, &section, FEATURE);
        let summary = cx
            .string(f, "summary", &section)
            .map(|s| s.value.to_string())
            .unwrap_or_default();
        let depends = match cx.table(f, "depends", &section) {
            Some(d) => depends::read(cx, d, &format!("{section}.depends")),
            None => Vec::new(),
        };
        let imports = module_names(cx, f, &section);
        features.insert(
            e.key.to_string(),
            Feature {
                summary,
                depends,
                imports,
            },
        );
    }
    features
}

/// The `imports` of `t`: dotted Python module names.
pub(super) fn module_names(cx: &mut Ctx, t: Table<'_>, section: &str) -> Vec<String> {
    let mut out = Vec::new();
    for m in cx.strings(t, "imports", section).unwrap_or_default() {
        let ok = !m.value.is_empty()
            && m.value.split('.').all(|p| {
                !p.is_empty()
                    && !p.starts_with(|c: char| c.is_ascii_digit())
                    && p.chars().all(|c| c.is_alphanumeric() || c == '_')
            });
        if ok {
            out.push(m.value.to_string());
        } else {
            cx.error(
                m.span,
                format!("`{}` is not a Python module name", m.value),
                "expected a dotted name such as `flashinfer.cute_dsl`",
            );
        }
    }
    out
}
