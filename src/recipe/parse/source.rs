//! `[source]`, and the same keys in a `[[versions]]` entry: exactly one of an sdist with its
//! sha256, a git repository at a revision, a local path, or a wheel requirement. It deliberately
//! does not check that a URL or path exists: fetching is the builder's job.

use std::ops::Range;
use std::path::PathBuf;

use super::cx::{Ctx, requirement};
use super::doc::Table;
use crate::recipe::model::Source;

/// The keys of `[source]`.
pub(super) const KEYS: &[&str] = &[
    "sdist",
    "sha256",
    "git",
    "rev",
    "subdir",
    "submodules",
    "path",
    "wheel",
    "index_url",
];

/// The keys that each name a kind of source.
pub(super) const KINDS: [&str; 4] = ["sdist", "git", "path", "wheel"];

/// What the `[source]` table says.
pub(super) struct SourceTable {
    pub source: Option<Source>,
    /// A diagnostic already says what is wrong with the table itself (an unknown key in it, or
    /// it names no source or several), so "missing table [source]" would only repeat it.
    pub reported: bool,
}

/// A table that names no source or several (already reported).
pub(super) struct NotOne;

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> SourceTable {
    let mut out = SourceTable {
        source: None,
        reported: false,
    };
    if let Some(t) = cx.table(root, "source", "") {
        out.reported = !cx.check_keys(t, "source", KEYS);
        match one(cx, t, "source", root.get("source").and_then(|i| i.span())) {
            Ok(s) => out.source = s,
            Err(NotOne) => out.reported = true,
        }
    }
    out
}

/// Whether `t` names any kind of source.
pub(super) fn names_any(t: Table<'_>) -> bool {
    KINDS.iter().any(|k| t.contains(k))
}

/// The one source `t` names (`None` when its keys are wrong, which is reported); `header` is
/// where a problem with the table as a whole is shown.
pub(super) fn one(
    cx: &mut Ctx,
    t: Table<'_>,
    section: &str,
    header: Option<Range<usize>>,
) -> Result<Option<Source>, NotOne> {
    let mut named = KINDS.iter().copied().filter(|k| t.contains(k));
    let (Some(kind), None) = (named.next(), named.next()) else {
        let kinds: Vec<&str> = KINDS.into_iter().filter(|k| t.contains(k)).collect();
        cx.error(
            header,
            if kinds.is_empty() {
                format!("[{section}] names no source")
            } else {
                format!("[{section}] names {} sources ({})", kinds.len(), kinds.join(", "))
            },
            "give exactly one of `sdist`, `git`, `path` or `wheel`",
        );
        return Err(NotOne);
    };
    Ok(match kind {
        "sdist" => sdist(cx, t, section),
        "git" => git(cx, t, section),
        "path" => cx.string(t, "path", section).map(|p| Source::Path {
            path: PathBuf::from(p.value),
        }),
        _ => wheel(cx, t, section),
    })
}

fn sdist(cx: &mut Ctx, t: Table<'_>, section: &str) -> Option<Source> {
    let url = cx.string(t, "sdist", section);
    let sha = cx.required(t, "sha256", section, t.get("sdist").and_then(|i| i.span()));
    if let Some(sha) = &sha
        && (sha.value.len() != 64 || !sha.value.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        cx.error(
            sha.span.clone(),
            "`source.sha256` must be 64 hex digits".into(),
            "copy the sdist's sha256 from PyPI (the `#sha256=` of its URL in the simple index) or `sha256sum FILE`",
        );
    }
    Some(Source::Sdist {
        url: url?.value.to_string(),
        sha256: sha?.value.to_ascii_lowercase(),
    })
}

fn git(cx: &mut Ctx, t: Table<'_>, section: &str) -> Option<Source> {
    let url = cx.string(t, "git", section);
    let rev = cx.required(t, "rev", section, t.get("git").and_then(|i| i.span()));
    let subdir = cx.string(t, "subdir", section).map(|x| x.value.to_string());
    let submodules = cx.bool(t, "submodules", section).unwrap_or(false);
    Some(Source::Git {
        url: url?.value.to_string(),
        rev: rev?.value.to_string(),
        subdir,
        submodules,
    })
}

fn wheel(cx: &mut Ctx, t: Table<'_>, section: &str) -> Option<Source> {
    let req = cx.string(t, "wheel", section);
    if let Some(r) = &req
        && let Err(e) = requirement(r.value)
    {
        cx.error(r.span.clone(), format!("bad requirement `{}`", r.value), e);
    }
    let index_url = cx.string(t, "index_url", section).map(|x| x.value.to_string());
    req.map(|r| Source::Wheel {
        requirement: r.value.to_string(),
        index_url,
    })
}
