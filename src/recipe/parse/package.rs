//! `[package]`: the component's name, kind, distribution, version and what installed versions
//! count as good, and the other names it may be installed under: `former` distribution names
//! (PEP 508 names the distribution had before a rename) and the top-level `import_packages` it
//! owns alone (a directory no other distribution may install files into), and the `companions`
//! it uses only at exactly its own version (`companions_why`: upstream's line that says so). It deliberately leaves
//! `[[versions]]` to [`super::versions`], which may supply the version this table leaves out.

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use pep508_rs::PackageName;

use super::cx::{At, Ctx, first_line};
use super::doc::Table;
use crate::recipe::model::Kind;

const KEYS: &[&str] = &[
    "name",
    "dist",
    "kind",
    "version",
    "accepts",
    "summary",
    "former",
    "import_packages",
    "companions",
    "companions_why",
];

/// What `[package]` says; defaults where the table is missing or a value is wrong.
pub(super) struct Package {
    pub name: Option<String>,
    pub dist: Option<String>,
    pub kind: Kind,
    pub version: Option<Version>,
    pub accepts: Option<String>,
    pub accepts_spec: Option<VersionSpecifiers>,
    pub summary: String,
    pub former: Vec<String>,
    pub import_packages: Vec<String>,
    pub companions: Vec<String>,
    pub companions_why: Option<String>,
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
        former: Vec::new(),
        import_packages: Vec::new(),
        companions: Vec::new(),
        companions_why: None,
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
    out.former = former(cx, p, out.kind, dist.as_ref());
    out.import_packages = import_packages(cx, p, out.kind);
    // `companions`: distributions it uses only at exactly its own version.
    for c in cx.strings(p, "companions", "package").unwrap_or_default() {
        check_dist(cx, &c);
        out.companions.push(c.value.to_string());
    }
    out.companions_why = cx.string(p, "companions_why", "package").map(|s| s.value.to_string());
    out.dist = dist.map(|d| d.value.to_string());
    out.name = name.map(|n| n.value.to_string());
    out
}

/// `former`: distribution names the component was published under before; each a name pip
/// accepts, none the component's own `dist`, none twice.
fn former(cx: &mut Ctx, p: Table<'_>, kind: Kind, dist: Option<&At<'_>>) -> Vec<String> {
    let Some(names) = cx.strings(p, "former", "package") else {
        return Vec::new();
    };
    if kind != Kind::Python {
        let span = p.get("former").and_then(|i| i.span());
        cx.error(
            span,
            "a `cuda-toolkit` component has no distribution, so no former one".into(),
            "remove `former`",
        );
        return Vec::new();
    }
    let own = dist.and_then(|d| PackageName::from_str(d.value).ok());
    let mut seen: Vec<PackageName> = Vec::new();
    let mut out = Vec::new();
    for n in names {
        let Ok(name) = PackageName::from_str(n.value) else {
            check_dist(cx, &n);
            continue;
        };
        if own.as_ref() == Some(&name) {
            cx.error(
                n.span,
                format!("`{}` is the component's own distribution", n.value),
                "`former` lists the names it had before, not `dist`",
            );
        } else if seen.contains(&name) {
            cx.error(
                n.span,
                format!("`{}` is listed twice", n.value),
                "list each former name once",
            );
        } else {
            seen.push(name);
            out.push(n.value.to_string());
        }
    }
    out
}

/// `import_packages`: the top-level packages (or modules) the component installs and owns alone,
/// each a Python identifier (`sgl_kernel`, not `sgl_kernel.ops`).
fn import_packages(cx: &mut Ctx, p: Table<'_>, kind: Kind) -> Vec<String> {
    let Some(names) = cx.strings(p, "import_packages", "package") else {
        return Vec::new();
    };
    if kind != Kind::Python {
        let span = p.get("import_packages").and_then(|i| i.span());
        cx.error(
            span,
            "a `cuda-toolkit` component installs no Python package".into(),
            "remove `import_packages`",
        );
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for n in names {
        let v = n.value;
        let identifier = !v.is_empty()
            && !v.starts_with(|c: char| c.is_ascii_digit())
            && v.chars().all(|c| c.is_alphanumeric() || c == '_');
        if !identifier {
            cx.error(
                n.span,
                format!("`{v}` is not a top-level Python package name"),
                "expected the directory in site-packages, such as `sgl_kernel` (no dots)",
            );
        } else if out.iter().any(|o| o == v) {
            cx.error(
                n.span,
                format!("`{v}` is listed twice"),
                "list each import package once",
            );
        } else {
            out.push(v.to_string());
        }
    }
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
