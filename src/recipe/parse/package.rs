//! `[package]`: the component's name, kind, distribution, version and what installed versions
//! count as good. It deliberately leaves `[[versions]]` to [`super::versions`], which may supply
//! the version this table leaves out.

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use pep508_rs::PackageName;

use super::cx::{At, Ctx, first_line};
use super::doc::Table;
use crate::recipe::model::Kind;

const KEYS: &[&str] = &["name", "dist", "kind", "version", "accepts", "summary"];

/// What `[package]` says; defaults where the table is missing or a value is wrong.
pub(super) struct Package {
    pub name: Option<String>,
    pub dist: Option<String>,
    pub kind: Kind,
    pub version: Option<Version>,
    pub accepts: Option<String>,
    pub accepts_spec: Option<VersionSpecifiers>,
    pub summary: String,
}

pub(super) fn read(cx: &mut Ctx, root: Table<'_>) -> Package {
    let mut out = Package {
        name: None,
        dist: None,
        kind: Kind::Python,
        version: None,
        accepts: None,
        accepts_spec: None,
        summary: String::new(),
    };
    let Some(p) = cx.table(root, "package", "") else {
        cx.error(
            Some(0..0),
            "missing table [package]".into(),
            "every recipe starts with [package] name = \"...\"",
        );
        return out;
    };
    let header = root.get("package").and_then(|i| i.span());
    cx.check_keys(p, "package", KEYS);
    let name = cx.required(p, "name", "package", header.clone());
    if let Some(k) = cx.string(p, "kind", "package") {
        match k.value {
            "python" => out.kind = Kind::Python,
            "cuda-toolkit" => out.kind = Kind::CudaToolkit,
            other => cx.error(
                k.span,
                format!("unknown kind `{other}`"),
                "expected `python` (default) or `cuda-toolkit`",
            ),
        }
    }
    let dist = cx.string(p, "dist", "package");
    if let Some(v) = cx.string(p, "version", "package") {
        match Version::from_str(v.value) {
            Ok(ver) => out.version = Some(ver),
            Err(e) => cx.error(
                v.span,
                format!("bad version `{}`", v.value),
                format!(
                    "{}; expected a PEP 440 version such as `0.7.4` or `2.14.1`",
                    first_line(&e.to_string())
                ),
            ),
        }
    } else if out.kind == Kind::Python && !p.contains("version") && !root.contains("versions") {
        cx.error(
            header,
            "missing key `package.version`".into(),
            "the version kiln installs when it must",
        );
    }
    if let Some(a) = cx.string(p, "accepts", "package") {
        out.accepts_spec = cx.specifiers(&a, format_args!("package.accepts"));
        out.accepts = Some(a.value.to_string());
    }
    out.summary = cx
        .string(p, "summary", "package")
        .map(|s| s.value.to_string())
        .unwrap_or_default();
    // A python component installs the distribution of its own name unless it names another.
    let dist = match dist {
        None if out.kind == Kind::Python => name.clone(),
        d => d,
    };
    if let Some(d) = &dist {
        check_dist(cx, d);
    }
    out.dist = dist.map(|d| d.value.to_string());
    out.name = name.map(|n| n.value.to_string());
    out
}

/// A distribution name must be one pip accepts (PEP 508), so that kiln can compare it with
/// what is installed.
fn check_dist(cx: &mut Ctx, d: &At<'_>) {
    if let Err(e) = PackageName::from_str(d.value) {
        cx.error(
            d.span.clone(),
            format!("`{}` is not a Python distribution name", d.value),
            first_line(&e.to_string()).to_string(),
        );
    }
}
