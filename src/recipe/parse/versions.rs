//! `[[versions]]`: the versions a recipe can install, newest first, each with its own source (or
//! the recipe's) and its own pins. Without `[[versions]]` the recipe describes one version, its
//! `[package] version` with its `[source]`. An entry may also carry what changed in that release:
//! its own build inputs (`[[versions.inputs]]`), `prepare` commands, verify `imports` and the
//! Python versions it supports (`python`, narrower than `[requires] python`). It
//! deliberately does not order or compare versions:
//! the order written is the order of preference.

use std::str::FromStr;

use pep440_rs::Version;

use super::cx::{Ctx, first_line};
use super::doc::Table;
use super::{depends, source, wheels};
use crate::recipe::model::{Kind, Source, VersionEntry};

/// The most `[[versions]]` one recipe may list.
pub const MAX_VERSIONS: usize = 63;

/// The keys of one `[[versions]]` entry: its own, then those of `[source]`.
static KEYS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    [
        &[
            "version",
            "depends",
            "wheels",
            "inputs",
            "targets",
            "prepare",
            "imports",
            "runtime_cuda",
            "constraints",
            "python",
            "gcc",
        ][..],
        source::KEYS,
    ]
    .concat()
});

/// The versions, and what they fill in of `[package]` and `[source]`.
pub(super) struct Versions {
    pub versions: Vec<VersionEntry>,
    /// `[package] version`, or the first entry's.
    pub version: Option<Version>,
    /// `[source]`, or the first entry's.
    pub source: Option<Source>,
    /// An entry was reported for having no source while the recipe has no `[source]`.
    pub reported_no_source: bool,
}

pub(super) fn read(
    cx: &mut Ctx,
    root: Table<'_>,
    kind: Kind,
    version: Option<Version>,
    source: Option<Source>,
) -> Versions {
    let mut out = Versions {
        versions: Vec::new(),
        version,
        source,
        reported_no_source: false,
    };
    let Some(item) = root.get("versions") else {
        if let Some(v) = &out.version {
            out.versions.push(VersionEntry::bare(v.clone(), out.source.clone()));
        }
        return out;
    };
    match item.as_array_of_tables() {
        Some(tables) => {
            for (i, (t, header)) in tables.enumerate() {
                // The solver holds a component's candidates (these and the installed one) as bits
                // of one 64-bit word.
                if i == MAX_VERSIONS {
                    cx.error(
                        Some(header.clone()),
                        format!("more than {MAX_VERSIONS} [[versions]]"),
                        "keep the versions people may still need; older ones belong in another recipe",
                    );
                }
                entry(cx, t, Some(header), kind, &mut out);
            }
        }
        None => cx.wrong_type(item, "an array of tables ([[versions]])", "versions", ""),
    }
    if let (Some(first), true) = (out.versions.first(), out.version.is_none()) {
        out.version = Some(first.version.clone());
    }
    if out.source.is_none() {
        out.source = out.versions.first().and_then(|e| e.source.clone());
    }
    out
}

fn entry(cx: &mut Ctx, t: Table<'_>, header: Option<std::ops::Range<usize>>, kind: Kind, out: &mut Versions) {
    cx.check_keys(t, "versions", &KEYS);
    let v = cx.required(t, "version", "versions", header.clone());
    let parsed = v.as_ref().and_then(|v| match Version::from_str(v.value) {
        Ok(x) => Some(x),
        Err(e) => {
            cx.error(
                v.span.clone(),
                format!("bad version `{}`", v.value),
                first_line(&e.to_string()).to_string(),
            );
            None
        }
    });
    let has_source = source::names_any(t);
    let own_source = if has_source {
        source::one(cx, t, "versions", header.clone()).unwrap_or(None)
    } else {
        out.source.clone()
    };
    if own_source.is_none() && kind == Kind::Python && !has_source {
        out.reported_no_source = true;
        cx.error(
            header,
            "this version names no source and the recipe has no [source]".into(),
            "add `sdist`/`git`/`path`/`wheel` to the entry",
        );
    }
    let deps = match cx.table(t, "depends", "versions") {
        Some(d) => depends::read(cx, d, "versions.depends"),
        None => Vec::new(),
    };
    let wheels = wheels::read(cx, t, parsed.as_ref());
    let inputs = super::inputs::read(cx, t, "versions.inputs");
    let targets = super::targets::read(cx, t, "versions.targets");
    let prepare = super::build::prepare(cx, t, "versions");
    let imports = t
        .contains("imports")
        .then(|| super::verify::module_names(cx, t, "versions"));
    let runtime_cuda = cx
        .string(t, "runtime_cuda", "versions")
        .and_then(|r| match lenient_cuda(r.value) {
            Some(v) => Some(v),
            None => {
                cx.error(
                    r.span,
                    format!("`runtime_cuda = \"{}\"` is not a CUDA version", r.value),
                    "write it as torch.version.cuda does, e.g. `13.0`",
                );
                None
            }
        });
    // This version's own Requires-Python, where it is narrower than the recipe's [requires]
    // python (torch 2.15.0 needs >= 3.11; 2.14.1 takes 3.10).
    let python = cx
        .string(t, "python", "versions")
        .and_then(|p| cx.specifiers(&p, format_args!("versions.python")));
    let gcc = cx
        .string(t, "gcc", "versions")
        .and_then(|g| cx.semver_req(&g, "versions.gcc"));
    let mut constraints = Vec::new();
    for c in cx.strings(t, "constraints", "versions").unwrap_or_default() {
        match pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(c.value) {
            Ok(_) => constraints.push(c.value.to_string()),
            Err(e) => cx.error(
                c.span,
                format!("`{}` is not a requirement: {e}", c.value),
                "write it as pip's constraints file does, e.g. `kernels>=0.12,<0.13`",
            ),
        }
    }
    if let Some(version) = parsed {
        out.versions.push(VersionEntry {
            version,
            source: own_source,
            depends: deps,
            wheels,
            inputs,
            targets,
            prepare,
            imports,
            runtime_cuda,
            constraints,
            python,
            gcc,
        });
    }
}

/// `13.0` or `12.8.1` as a version (the patch defaults to 0).
fn lenient_cuda(s: &str) -> Option<semver::Version> {
    let mut parts = s.trim().split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next().unwrap_or(Some(0))?;
    let patch = parts.next().unwrap_or(Some(0))?;
    parts
        .next()
        .is_none()
        .then(|| semver::Version::new(major, minor, patch))
}
