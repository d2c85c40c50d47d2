//! `[requires]` and `[[requires.rule]]`: what a component needs from the machine (Python, CUDA
//! toolkit and the parts of it the build uses, host compiler, tools on PATH) and the per-arch rules with their reasons. It
//! deliberately only parses the requirements: checking them against a machine is the resolver's job.

use std::ops::Range;

use super::cx::Ctx;
use super::doc::Table;
use crate::recipe::model::{Requires, Rule};
use crate::recipe::toolkit::ToolkitPart;

const KEYS: &[&str] = &["python", "cuda", "gcc", "tools", "toolkit", "rule"];
const RULE: &[&str] = &["arch", "cuda", "unsupported", "why"];

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> Requires {
    let mut requires = Requires::default();
    let Some(r) = cx.table(root, "requires", "") else {
        return requires;
    };
    cx.check_keys(r, "requires", KEYS);
    if let Some(p) = cx.string(r, "python", "requires") {
        requires.python_spec = cx.specifiers(&p, format_args!("requires.python"));
        requires.python = Some(p.value.to_string());
    }
    if let Some(c) = cx.string(r, "cuda", "requires") {
        match semver::VersionReq::parse(c.value) {
            Ok(req) => requires.cuda_req = Some(req),
            Err(e) => cx.error(
                c.span.clone(),
                format!("bad CUDA version requirement `{}`", c.value),
                format!("{e}; expected something like `>=12.8`"),
            ),
        }
        requires.cuda = Some(c.value.to_string());
    }
    if let Some(g) = cx.string(r, "gcc", "requires") {
        requires.gcc_req = cx.semver_req(&g, "requires.gcc");
        requires.gcc = Some(g.value.to_string());
    }
    for part in cx.strings(r, "toolkit", "requires").unwrap_or_default() {
        match ToolkitPart::from_name(part.value) {
            Some(p) if !requires.toolkit.contains(&p) => requires.toolkit.push(p),
            Some(_) => {}
            None => cx.error(
                part.span.clone(),
                format!("`{}` is not a part of a CUDA toolkit kiln checks", part.value),
                format!("write one of: {}", ToolkitPart::ALL.map(ToolkitPart::name).join(", ")),
            ),
        }
    }
    if let Some(item) = r.get("rule") {
        match item.as_array_of_tables() {
            Some(tables) => {
                for (t, header) in tables {
                    requires.rules.extend(rule(cx, t, Some(header)));
                }
            }
            None => cx.wrong_type(item, "an array of tables ([[requires.rule]])", "rule", "requires"),
        }
    }
    super::tools::read(cx, r, &mut requires);
    requires
}

fn rule(cx: &mut Ctx, t: Table<'_>, header: Option<Range<usize>>) -> Option<Rule> {
    let section = "requires.rule";
    cx.check_keys(t, section, RULE);
    let why = cx.required(t, "why", section, header.clone());
    let arch = cx.archs(t, "arch", section).unwrap_or_default();
    if arch.is_empty() {
        cx.error(
            header.clone(),
            "a [[requires.rule]] needs `arch`: the target archs it applies to".into(),
            "add `arch = [\"12.0\"]`",
        );
    }
    let cuda = cx.string(t, "cuda", section);
    let cuda_req = cuda.as_ref().and_then(|c| cx.semver_req(c, "requires.rule.cuda"));
    let unsupported = cx.bool(t, "unsupported", section).unwrap_or(false);
    if cuda.is_none() && !unsupported {
        cx.error(
            header,
            "a [[requires.rule]] needs `cuda` or `unsupported = true`".into(),
            "add `cuda = \">=12.8\"` (the toolkit the arch needs), or `unsupported = true` with `why`",
        );
    }
    Some(Rule {
        arch,
        cuda: cuda.map(|c| c.value.to_string()),
        cuda_req,
        unsupported,
        why: why?.value.to_string(),
    })
}
