//! `[binaries]` and `[[binaries.optional]]`: the CUDA binaries of a distribution that may lack an
//! image on some target archs, named by globs over its RECORD paths, each with the archs, the
//! component versions it holds for (optional) and the reason with its upstream source. It
//! deliberately does not check that a glob matches anything: the binaries are known only once a
//! wheel is read or a distribution installed, and the verdict says which globs matched.

use std::ops::Range;

use super::cx::Ctx;
use super::doc::Table;
use crate::recipe::binaries::{OptionalBinaries, glob_set};

const KEYS: &[&str] = &["optional"];
const OPTIONAL: &[&str] = &["files", "arch", "versions", "why"];

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> Vec<OptionalBinaries> {
    let mut out = Vec::new();
    let Some(b) = cx.table(root, "binaries", "") else {
        return out;
    };
    cx.check_keys(b, "binaries", KEYS);
    if let Some(item) = b.get("optional") {
        match item.as_array_of_tables() {
            Some(tables) => {
                for (t, header) in tables {
                    out.extend(optional(cx, t, Some(header)));
                }
            }
            None => cx.wrong_type(
                item,
                "an array of tables ([[binaries.optional]])",
                "optional",
                "binaries",
            ),
        }
    }
    out
}

fn optional(cx: &mut Ctx, t: Table<'_>, header: Option<Range<usize>>) -> Option<OptionalBinaries> {
    let section = "binaries.optional";
    cx.check_keys(t, section, OPTIONAL);
    let why = cx.required(t, "why", section, header.clone());
    let files = cx.strings(t, "files", section).unwrap_or_default();
    if files.is_empty() {
        cx.error(
            header.clone(),
            "a [[binaries.optional]] needs `files`: globs over the distribution's RECORD paths".into(),
            "add `files = [\"pkg/_kernels*.so\"]` (`*` stays within a directory, `**` crosses them)",
        );
    }
    let texts: Vec<&str> = files.iter().map(|f| f.value).collect();
    let matcher = match glob_set(&texts) {
        Ok(m) => Some(m),
        Err((i, e)) => {
            cx.error(
                files.get(i).and_then(|f| f.span.clone()),
                format!("bad glob `{}`: {e}", texts.get(i).copied().unwrap_or_default()),
                "use `*`, `?`, `[abc]`, `{a,b}` and `**` (globset syntax)",
            );
            None
        }
    };
    let arch = cx.archs(t, "arch", section).unwrap_or_default();
    if arch.is_empty() {
        cx.error(
            header.clone(),
            "a [[binaries.optional]] needs `arch`: the target archs on which these binaries may lack an image".into(),
            "add `arch = [\"12.0\"]`",
        );
    }
    let versions = cx.string(t, "versions", section);
    let versions_spec = versions
        .as_ref()
        .and_then(|v| cx.specifiers(v, format_args!("binaries.optional.versions")));
    Some(OptionalBinaries {
        files: texts.iter().map(|f| f.to_string()).collect(),
        matcher: matcher.filter(|_| !files.is_empty())?,
        arch,
        versions: versions.map(|v| v.value.to_string()),
        versions_spec,
        why: why?.value.to_string(),
        span: header,
    })
}
