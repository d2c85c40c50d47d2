//! A `depends` table (`[depends]`, a feature's or a version's): component names with a PEP 440
//! specifier string or `{ version, abi, features, why }` (`why`: the reason for a bound that
//! comes from how the component compiles, with its upstream source). It deliberately does not check that the
//! names exist: that needs the other recipes ([`crate::recipe::set`]).

use super::cx::{At, Ctx};
use super::doc::Table;
use crate::recipe::model::Dependency;

const KEYS: &[&str] = &["version", "abi", "features", "why"];

/// The dependencies in `t`, in the order written; `section` names `t` in messages.
pub(super) fn read(cx: &mut Ctx, t: Table<'_>, section: &str) -> Vec<Dependency> {
    let mut out = Vec::new();
    for e in t.entries() {
        let name = e.key;
        let mut dep = Dependency {
            name: name.to_string(),
            version: None,
            spec: None,
            abi: false,
            features: Vec::new(),
            why: None,
            span: Some(e.key_span),
        };
        if let Some(s) = e.item.as_str() {
            let at = At {
                value: s,
                span: e.item.span(),
            };
            dep.spec = cx.specifiers(&at, format_args!("dependency `{name}`"));
            dep.version = Some(s.to_string());
        } else if let Some(tt) = e.item.as_table() {
            let sub = format!("{section}.{name}");
            cx.check_keys(tt, &sub, KEYS);
            if let Some(v) = cx.string(tt, "version", &sub) {
                dep.spec = cx.specifiers(&v, format_args!("dependency `{name}`"));
                dep.version = Some(v.value.to_string());
            }
            dep.abi = cx.bool(tt, "abi", &sub).unwrap_or(false);
            dep.why = cx.string(tt, "why", &sub).map(|w| w.value.to_string());
            dep.features = cx
                .strings(tt, "features", &sub)
                .unwrap_or_default()
                .into_iter()
                .map(|f| f.value.to_string())
                .collect();
        } else {
            cx.wrong_type(
                e.item,
                "a version specifier string or a table { version, abi, features }",
                name,
                section,
            );
            continue;
        }
        if dep
            .version
            .as_deref()
            .is_some_and(|v| v.trim().is_empty() || v.trim() == "*")
        {
            dep.version = None;
            dep.spec = None;
        }
        out.push(dep);
    }
    out
}
