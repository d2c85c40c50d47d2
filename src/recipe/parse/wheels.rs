//! `wheels = [{ url = "...", sha256 = "..." }]` in a `[[versions]]` entry: the prebuilt wheels a
//! version offers next to its source, one per platform. Each URL's file name must be a wheel of
//! this version (the binary distribution format); its tags are kept for the interpreter to match.
//! It deliberately does not check that a URL exists or which wheel fits this machine: choosing
//! one is `resolve::wheel_choice`'s job, fetching it the downloader's.

use std::str::FromStr;

use pep440_rs::Version;
use pep508_rs::PackageName;

use super::cx::Ctx;
use super::doc::Table;
use crate::recipe::binaries::{PrebuiltWheel, file_name_of, parse_wheel_name};
use crate::recipe::model::VersionEntry;

const KEYS: &[&str] = &["url", "sha256"];

/// The `wheels` of one `[[versions]]` entry of version `version` (when it parsed).
pub(super) fn read(cx: &mut Ctx, t: Table<'_>, version: Option<&Version>) -> Vec<PrebuiltWheel> {
    let mut out = Vec::new();
    let Some(item) = t.get("wheels") else {
        return out;
    };
    let Some(list) = item.as_array() else {
        cx.wrong_type(item, "an array of inline tables", "wheels", "versions");
        return out;
    };
    for w in list {
        let Some(wt) = w.as_table() else {
            cx.error(
                w.span(),
                format!("`versions.wheels` must hold inline tables, found {}", w.type_name()),
                "write each wheel as { url = \"https://.../NAME-VERSION-PY-ABI-PLATFORM.whl\", sha256 = \"...\" }",
            );
            continue;
        };
        out.extend(one(cx, wt, w.span(), version));
    }
    out
}

fn one(
    cx: &mut Ctx,
    t: Table<'_>,
    span: Option<std::ops::Range<usize>>,
    version: Option<&Version>,
) -> Option<PrebuiltWheel> {
    let section = "versions.wheels";
    cx.check_keys(t, section, KEYS);
    let url = cx.required(t, "url", section, span.clone());
    let sha = cx.required(t, "sha256", section, span.clone());
    if let Some(sha) = &sha
        && (sha.value.len() != 64 || !sha.value.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        cx.error(
            sha.span.clone(),
            "`versions.wheels.sha256` must be 64 hex digits".into(),
            "copy the wheel's sha256 from PyPI (`digests.sha256` in https://pypi.org/pypi/NAME/VERSION/json) or `sha256sum FILE`",
        );
    }
    let url = url?;
    let file = file_name_of(url.value);
    let name = match parse_wheel_name(&file) {
        Ok(n) => n,
        Err(e) => {
            cx.error(
                url.span.clone(),
                format!("the URL does not name a wheel file: {e}"),
                "give the URL of the .whl file itself (its name says the version and the platform tags)",
            );
            return None;
        }
    };
    if let Some(v) = version
        && name.version.clone().without_local() != v.clone().without_local()
    {
        cx.error(
            url.span.clone(),
            format!("`{file}` is version {}, this entry is version {v}", name.version),
            "list a wheel under the [[versions]] entry of its own version",
        );
    }
    Some(PrebuiltWheel {
        url: url.value.to_string(),
        sha256: sha?.value.to_ascii_lowercase(),
        file,
        tags: name.tags,
        span: url.span,
    })
}

/// Reports every wheel whose file name names another distribution than `dist`.
pub(super) fn check_names(cx: &mut Ctx, versions: &[VersionEntry], dist: &str) {
    let Ok(want) = PackageName::from_str(dist) else {
        return;
    };
    for w in versions.iter().flat_map(|v| &v.wheels) {
        let Ok(name) = parse_wheel_name(&w.file) else { continue };
        if PackageName::from_str(&name.name).ok().as_ref() != Some(&want) {
            cx.error(
                w.span.clone(),
                format!("`{}` is a wheel of `{}`, not of `{dist}`", w.file, name.name),
                "list only wheels of the recipe's own distribution ([package] dist)",
            );
        }
    }
}
