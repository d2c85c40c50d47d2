//! `[build]` and `[install]`: the build overlay's requirements, the environment and commands
//! (templates, checked for unknown variables now), the memory one compile job needs, and whether
//! the wheel's own dependencies are installed. It deliberately renders nothing: values such as
//! `{jobs}` are only known when a build is planned.

use std::collections::BTreeMap;

use super::cx::{At, Ctx, requirement};
use super::doc::{Item, Table};
use crate::recipe::model::Build;
use crate::recipe::template::Template;

const KEYS: &[&str] = &[
    "requires",
    "env",
    "prepare",
    "wheel",
    "memory_per_job",
    "cargo_manifest",
    "stall",
    "limit",
    "inputs",
    "targets",
    "network",
];
const INSTALL: &[&str] = &["deps"];

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> Build {
    let mut build = Build::default();
    let Some(b) = cx.table(root, "build", "") else {
        return build;
    };
    cx.check_keys(b, "build", KEYS);
    for r in cx.strings(b, "requires", "build").unwrap_or_default() {
        match requirement(r.value) {
            Ok(_) => build.requires.push(r.value.to_string()),
            Err(e) => cx.error(r.span, format!("bad requirement `{}` in build.requires", r.value), e),
        }
    }
    if let Some(env) = cx.table(b, "env", "build") {
        build.env = templates(cx, env, "build.env");
    }
    build.prepare = prepare(cx, b, "build").unwrap_or_default();
    if let Some(args) = cx.strings(b, "wheel", "build") {
        if args.is_empty() {
            cx.error(
                b.get("wheel").and_then(|i| i.span()),
                "`build.wheel` must not be empty".into(),
                "give the command that writes the wheel into {wheel_dir}, or leave `wheel` out for `pip wheel`",
            );
        }
        build.wheel = Some(args.iter().filter_map(|a| cx.template(a)).collect());
    }
    if let Some(m) = cx.string(b, "memory_per_job", "build") {
        match parse_bytes(m.value) {
            Some(n) if n > 0 => build.memory_per_job = Some(n),
            _ => cx.error(
                m.span,
                format!("bad size `{}`", m.value),
                "expected a size such as `4GiB` or `512MiB`",
            ),
        }
    }
    build.cargo_manifest = cx.string(b, "cargo_manifest", "build").map(|s| s.value.to_string());
    for (key, slot) in [("stall", &mut build.stall), ("limit", &mut build.limit)] {
        if let Some(d) = cx.string(b, key, "build") {
            match crate::recipe::model::parse_duration(d.value) {
                Some(t) => *slot = Some(t),
                None => cx.error(
                    d.span,
                    format!("bad duration `{}` in build.{key}", d.value),
                    "expected a number and a unit: `90s`, `20m`, `6h` or `1d`",
                ),
            }
        }
    }
    build.inputs = super::inputs::read(cx, b, "build.inputs");
    build.targets = super::targets::read(cx, b, "build.targets");
    build.network = cx.bool(b, "network", "build");
    build
}

/// `prepare` of `t` (`[build]` or a `[[versions]]` entry): an array of commands; `None` when
/// `t` has none.
pub(super) fn prepare(cx: &mut Ctx, t: Table<'_>, section: &str) -> Option<Vec<Vec<Template>>> {
    let item = t.get("prepare")?;
    let mut out = Vec::new();
    match item.as_array() {
        Some(cmds) => {
            for cmd in cmds {
                if let Some(args) = command(cx, cmd) {
                    out.push(args);
                }
            }
        }
        None => cx.wrong_type(item, "an array of commands", "prepare", section),
    }
    Some(out)
}

/// One `prepare` command: a non-empty array of template strings.
fn command(cx: &mut Ctx, cmd: Item<'_>) -> Option<Vec<Template>> {
    let args: Vec<Item<'_>> = match cmd.as_array() {
        Some(args) => args.collect(),
        None => Vec::new(),
    };
    if args.is_empty() {
        cx.error(
            cmd.span(),
            "`build.prepare` must be an array of commands, each an array of strings".into(),
            "e.g. prepare = [[\"{python}\", \"tools/use_existing_torch.py\"]]",
        );
        return None;
    }
    let mut out = Vec::new();
    for a in args {
        match a.as_str() {
            Some(s) => out.extend(cx.template(&At {
                value: s,
                span: a.span(),
            })),
            None => cx.error(
                a.span(),
                format!("a command argument must be a string, found {}", a.type_name()),
                "quote every argument: `[\"{python}\", \"-m\", \"...\"]`",
            ),
        }
    }
    Some(out)
}

/// `[install] deps`: whether the wheel's own dependencies are installed too.
pub(super) fn install_deps(cx: &mut Ctx, root: Table<'_>) -> bool {
    let Some(i) = cx.table(root, "install", "") else {
        return false;
    };
    cx.check_keys(i, "install", INSTALL);
    cx.bool(i, "deps", "install").unwrap_or(false)
}

/// A size such as `4GiB`, `512MiB`, `8GB` in bytes.
fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim() {
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GB" => 1e9,
        "MB" => 1e6,
        _ => return None,
    };
    Some((num * mult) as u64)
}

/// A table of `NAME = "template"` strings (`[build] env`, `[verify] jit_env`).
pub(super) fn templates(cx: &mut Ctx, t: Table<'_>, section: &str) -> BTreeMap<String, Template> {
    let mut out = BTreeMap::new();
    for e in t.entries() {
        match e.item.as_str() {
            Some(v) => {
                let at = At {
                    value: v,
                    span: e.item.span(),
                };
                if let Some(t) = cx.template(&at) {
                    out.insert(e.key.to_string(), t);
                }
            }
            None => cx.wrong_type(e.item, "a string", e.key, section),
        }
    }
    out
}
