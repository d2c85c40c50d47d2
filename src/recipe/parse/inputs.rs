//! `[[build.inputs]]` and `[[versions.inputs]]`: the sources an upstream build would download
//! itself, each with its pinned identity (a git commit, or an archive with its sha256), the
//! variables that point the build at kiln's copy (`{path}`), the target archs that need it and
//! the upstream line that downloads it (`why`). Every problem is reported at its own place.
//!
//! It deliberately does not check that a URL answers or that a commit exists (fetching is the
//! builder's job), nor which variables an upstream build reads (the recipe says so in `why`).

use std::collections::BTreeMap;

use super::cx::Ctx;
use super::doc::Table;
use crate::recipe::inputs::{Input, InputSource, InputValue, Submodules};

const KEYS: &[&str] = &[
    "name",
    "git",
    "rev",
    "tag",
    "submodules",
    "archive",
    "sha256",
    "wheel",
    "member",
    "place",
    "subdir",
    "env",
    "arch",
    "why",
];

/// The inputs under `key` of `t` (an array of tables), `section` naming it in messages
/// (`build.inputs`, `versions.inputs`).
pub(super) fn read(cx: &mut Ctx, t: Table<'_>, section: &str) -> Vec<Input> {
    cx.named_tables(
        t,
        "inputs",
        section,
        |cx, table, header| one(cx, table, header, section),
        |i| i.name.as_str(),
        |name| {
            (
                format!("build input `{name}` is declared twice"),
                "give each input of one build its own name",
            )
        },
    )
}

fn one(cx: &mut Ctx, t: Table<'_>, header: std::ops::Range<usize>, section: &str) -> Option<Input> {
    cx.check_keys(t, section, KEYS);
    let name = cx.required(t, "name", section, Some(header.clone()));
    if let Some(n) = &name
        && !valid_name(n.value)
    {
        cx.error(
            n.span.clone(),
            format!("bad build input name `{}`", n.value),
            "lower-case letters, digits, `-`, `_` and `.`, starting with a letter or digit (it names a directory)",
        );
    }
    let from = source(cx, t, header.clone(), section);
    let subdir = cx.string(t, "subdir", section);
    if let Some(s) = &subdir
        && !relative_inside(s.value)
    {
        cx.error(
            s.span.clone(),
            format!(
                "`{section}.subdir` must be a relative path inside the input, found `{}`",
                s.value
            ),
            "name a directory of the fetched tree, such as `python/triton_kernels`",
        );
    }
    let env = env(cx, t, header.clone(), section);
    let arch = t.get("arch").and_then(|_| cx.archs(t, "arch", section));
    if arch.as_ref().is_some_and(Vec::is_empty) {
        cx.error(
            t.get("arch").and_then(|i| i.span()),
            "`arch = []` would make the input needed by no build".into(),
            "name the target archs whose build downloads it, or leave `arch` out (every build)",
        );
    }
    let why = cx.required(t, "why", section, Some(header.clone()));
    if let Some(w) = &why
        && w.value.trim().is_empty()
    {
        cx.error(
            w.span.clone(),
            "`why` of a build input is empty".into(),
            "say where the upstream build downloads it (file:line) and what for",
        );
    }
    Some(Input {
        name: name.filter(|n| valid_name(n.value))?.value.to_string(),
        from: from?,
        subdir: subdir.map(|s| s.value.to_string()),
        env: env?,
        arch,
        why: why?.value.to_string(),
    })
}

/// Exactly one of `git` (with `rev`, a full commit), `archive` (with `sha256`) and `wheel`
/// (with `sha256`, `member` and `place`).
fn source(cx: &mut Ctx, t: Table<'_>, header: std::ops::Range<usize>, section: &str) -> Option<InputSource> {
    let kinds = ["git", "archive", "wheel"].iter().filter(|k| t.contains(k)).count();
    if kinds == 1 && t.contains("wheel") {
        return wheel(cx, t, section);
    }
    if kinds != 1 {
        cx.error(
            Some(header),
            if kinds > 1 {
                "a build input names more than one of `git`, `archive` and `wheel`".into()
            } else {
                "a build input names no source".into()
            },
            "give exactly one of `git` (with `rev`, a commit), `archive` (with `sha256`) or `wheel` (with `sha256`, `member`, `place`)",
        );
        return None;
    }
    for key in ["member", "place"] {
        if let Some(i) = t.get(key) {
            cx.error(
                i.span(),
                format!("`{key}` belongs to a `wheel` input"),
                "take files out of a wheel with `wheel = URL`, `sha256`, `member` and `place`",
            );
        }
    }
    match (t.contains("git"), t.contains("archive")) {
        (true, false) => {
            for key in ["sha256"] {
                if let Some(i) = t.get(key) {
                    cx.error(
                        i.span(),
                        format!("`{key}` belongs to an `archive` input, not a `git` one"),
                        "pin a git input by its commit in `rev`",
                    );
                }
            }
            let url = cx.string(t, "git", section);
            let rev = cx.string(t, "rev", section);
            if let Some(r) = &rev
                && !is_commit(r.value)
            {
                cx.error(
                    r.span.clone(),
                    format!("`rev` of a build input must be a full commit, found `{}`", r.value),
                    "a tag or branch can move: write the 40 hex digits of the commit in `rev` and the tag in `tag`",
                );
            }
            let tag = cx.string(t, "tag", section);
            if let Some(g) = &tag
                && (g.value.is_empty() || g.value.starts_with('-') || g.value.contains(char::is_whitespace))
            {
                cx.error(
                    g.span.clone(),
                    format!("bad tag `{}`", g.value),
                    "the tag as upstream names it, such as `v4.7.1`",
                );
            }
            if rev.is_none() && tag.is_none() {
                cx.error(
                    t.get("git").and_then(|i| i.span()),
                    "a git build input needs `rev` (a full commit) or, where the commit cannot be verified, `tag`"
                        .into(),
                    "add `rev = \"<40 hex digits>\"` (and the upstream name in `tag`)",
                );
            }
            let submodules = submodules(cx, t, section);
            let url = url?;
            if rev.as_ref().is_some_and(|r| !is_commit(r.value)) || (rev.is_none() && tag.is_none()) {
                return None;
            }
            Some(InputSource::Git {
                git: url.value.to_string(),
                rev: rev.map(|r| r.value.to_ascii_lowercase()),
                tag: tag.map(|g| g.value.to_string()),
                submodules,
            })
        }
        (false, true) => {
            for key in ["rev", "tag", "submodules"] {
                if let Some(i) = t.get(key) {
                    cx.error(
                        i.span(),
                        format!("`{key}` belongs to a `git` input, not an `archive` one"),
                        "pin an archive by its `sha256`",
                    );
                }
            }
            let url = cx.string(t, "archive", section);
            let sha = cx.required(t, "sha256", section, t.get("archive").and_then(|i| i.span()));
            let good = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
            if let Some(s) = &sha
                && !good(s.value)
            {
                cx.error(
                    s.span.clone(),
                    format!("`{section}.sha256` must be 64 hex digits"),
                    "`sha256sum FILE` of the archive",
                );
            }
            let (url, sha) = (url?, sha.filter(|s| good(s.value))?);
            Some(InputSource::Archive {
                archive: url.value.to_string(),
                sha256: sha.value.to_ascii_lowercase(),
            })
        }
        (both, _) => {
            cx.error(
                Some(header),
                if both {
                    "a build input names both `git` and `archive`".into()
                } else {
                    "a build input names no source".into()
                },
                "give exactly one of `git` (with `rev`, a commit) or `archive` (with `sha256`)",
            );
            None
        }
    }
}

/// `wheel = URL`, `sha256`, `member` (a path in the wheel; a directory ends in `/`) and `place`
/// (where it goes in the input's directory).
fn wheel(cx: &mut Ctx, t: Table<'_>, section: &str) -> Option<InputSource> {
    for key in ["rev", "tag", "submodules", "subdir"] {
        if let Some(i) = t.get(key) {
            cx.error(
                i.span(),
                format!("`{key}` does not belong to a `wheel` input"),
                "name the files with `member` and where they go with `place`",
            );
        }
    }
    let at = t.get("wheel").and_then(|i| i.span());
    let url = cx.string(t, "wheel", section);
    if let Some(u) = &url
        && !u.value.ends_with(".whl")
    {
        cx.error(
            u.span.clone(),
            format!("`{}` is not a wheel (its name ends in `.whl`)", u.value),
            "the URL of the wheel file, as PyPI's simple index lists it",
        );
    }
    let sha = cx.required(t, "sha256", section, at.clone());
    let good = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(s) = &sha
        && !good(s.value)
    {
        cx.error(
            s.span.clone(),
            format!("`{section}.sha256` must be 64 hex digits"),
            "`sha256sum FILE` of the wheel, or the sha256 PyPI's simple index gives",
        );
    }
    let mut paths = Vec::new();
    for (key, example) in [
        ("member", "`vllm/third_party/fmha_sm100/`"),
        ("place", "`python/fmha_sm100/`"),
    ] {
        let v = cx.required(t, key, section, at.clone());
        if let Some(p) = &v
            && !relative_inside(p.value.trim_end_matches('/'))
        {
            cx.error(
                p.span.clone(),
                format!(
                    "`{section}.{key}` must be a relative path inside the wheel or input, found `{}`",
                    p.value
                ),
                format!("a path such as {example} (a directory ends in `/`)"),
            );
            paths.push(None);
            continue;
        }
        paths.push(v);
    }
    let [member, place]: [_; 2] = paths.try_into().ok()?;
    let (url, sha, member, place) = (url?, sha.filter(|s| good(s.value))?, member?, place?);
    if !url.value.ends_with(".whl") {
        return None;
    }
    Some(InputSource::Wheel {
        wheel: url.value.to_string(),
        sha256: sha.value.to_ascii_lowercase(),
        member: member.value.to_string(),
        place: place.value.to_string(),
    })
}

/// `submodules`: `true` (all), `false`, or the paths to check out.
fn submodules(cx: &mut Ctx, t: Table<'_>, section: &str) -> Submodules {
    let Some(item) = t.get("submodules") else {
        return Submodules::None;
    };
    if let Some(b) = item.as_bool() {
        return if b { Submodules::All } else { Submodules::None };
    }
    if item.as_array().is_none() {
        cx.wrong_type(item, "true, false or an array of paths", "submodules", section);
        return Submodules::None;
    }
    let paths = cx.strings(t, "submodules", section).unwrap_or_default();
    let mut out = Vec::new();
    for p in paths {
        if relative_inside(p.value) {
            out.push(p.value.to_string());
        } else {
            cx.error(
                p.span,
                format!("`{}` is not a path inside the repository", p.value),
                "name a submodule by its path, such as `csrc/cutlass`",
            );
        }
    }
    if out.is_empty() {
        Submodules::None
    } else {
        Submodules::Only(out)
    }
}

/// `env`: a non-empty table of variables, each a string with `{path}`.
fn env(
    cx: &mut Ctx,
    t: Table<'_>,
    header: std::ops::Range<usize>,
    section: &str,
) -> Option<BTreeMap<String, InputValue>> {
    let Some(table) = cx.table(t, "env", section) else {
        if !t.contains("env") {
            cx.error(
                Some(header),
                format!("missing key `{section}.env`"),
                "say how the upstream build is pointed at the input: env = { NAME_SRC_DIR = \"{path}\" }",
            );
        }
        return None;
    };
    let mut out = BTreeMap::new();
    let mut clean = true;
    for e in table.entries() {
        if !valid_variable(e.key) {
            clean = false;
            cx.error(
                Some(e.key_span.clone()),
                format!("bad variable name `{}`", e.key),
                "letters, digits and `_`, not starting with a digit",
            );
            continue;
        }
        let Some(raw) = e.item.as_str() else {
            clean = false;
            cx.wrong_type(e.item, "a string", e.key, &format!("{section}.env"));
            continue;
        };
        match InputValue::parse(raw) {
            Ok(v) => {
                out.insert(e.key.to_string(), v);
            }
            Err((at, len, why)) => {
                clean = false;
                let span = e.item.span().map(|sp| {
                    let inner = sp.start + 1..sp.end.saturating_sub(1);
                    if cx.text(inner.clone()) == Some(raw) {
                        inner.start + at..inner.start + at + len
                    } else {
                        sp
                    }
                });
                cx.error(span, why, "write `{path}` where the input's directory goes");
            }
        }
    }
    if out.is_empty() && clean {
        cx.error(
            t.get("env").and_then(|i| i.span()),
            format!("`{section}.env` is empty"),
            "name at least one variable the upstream build reads: env = { NAME_SRC_DIR = \"{path}\" }",
        );
    }
    (clean && !out.is_empty()).then_some(out)
}

fn valid_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'))
}

fn valid_variable(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A full commit: 40 hex digits (SHA-1), or 64 (SHA-256 repositories).
fn is_commit(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn relative_inside(s: &str) -> bool {
    let p = std::path::Path::new(s);
    !s.is_empty()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
}
