//! A lockfile's values checked as data, at read time: a lock comes from elsewhere (a bundle, a
//! colleague, a repository) and its values become paths in the cache (`sources/<sha256>`),
//! arguments to `git` and names of wheels to trust. Each value has one shape, and a value of
//! another shape is a diagnostic at its `file:line:col`, with the fix.
//!
//! The shapes: a component name is a Python package name (PEP 503), a version is PEP 440, a
//! source is `sha256:` and 64 hex digits, `git:` and a commit or a ref name that cannot be read
//! as an option (`git check-ref-format` rules, <https://git-scm.com/docs/git-check-ref-format>),
//! `path:<dir>`, `index:<requirement>`, `wheel:` and 64 hex digits or `installed`; a wheel's
//! sha256 is 64 hex digits and a `wheel_url`'s last segment a wheel file name; a
//! build input is `git:` and a commit or ref (as a source) or `sha256:` and 64 hex digits. It
//! deliberately ignores whether the values are true (a commit that does not exist is the
//! build's error) and the environment section (typed by serde).

use std::ops::Range;
use std::str::FromStr;

use serde::Deserialize;
use toml::Spanned;

/// The values of a lock that are checked, with where they are.
#[derive(Deserialize)]
struct Spans {
    #[serde(default)]
    component: Vec<Component>,
}

#[derive(Deserialize)]
struct Component {
    name: Spanned<String>,
    version: Spanned<String>,
    source: Spanned<String>,
    #[serde(default)]
    wheel_sha256: Option<Spanned<String>>,
    #[serde(default)]
    wheel_url: Option<Spanned<String>>,
    #[serde(default)]
    inputs: std::collections::BTreeMap<String, Spanned<String>>,
}

/// A value of the wrong shape: where, what is wrong, how to fix it.
pub(super) struct Bad {
    pub span: Range<usize>,
    pub message: String,
    pub help: String,
}

/// Whether `s` is a sha256 as kiln writes it: 64 hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `rev` names a git commit (hex) or a ref that `git` cannot take for an option and
/// that stays a plain ref name (no `..`, `@{`, control characters, spaces, `~^:?*[\`, no
/// leading `-` or `/`).
pub fn is_git_rev(rev: &str) -> bool {
    if rev.is_empty() || rev.len() > 255 || rev.starts_with(['-', '/', '.']) || rev.ends_with(['/', '.']) {
        return false;
    }
    let bad_char = |c: char| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c);
    !(rev.chars().any(bad_char)
        || rev.contains("..")
        || rev.contains("@{")
        || rev.contains("//")
        || rev.ends_with(".lock")
        || rev == "@"
        || rev.split('/').any(|part| part.starts_with('.')))
}

/// Every value of the wrong shape in the lock `text` (already read by serde), in file order.
pub(super) fn check(text: &str) -> Vec<Bad> {
    let Ok(spans) = toml::from_str::<Spans>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in &spans.component {
        let mut bad = |v: &Spanned<String>, message: String, help: &str| {
            out.push(Bad {
                span: v.span(),
                message,
                help: help.to_string(),
            })
        };
        if pep508_rs::PackageName::from_str(c.name.get_ref()).is_err() {
            bad(
                &c.name,
                format!("`{}` is not a component name", crate::shown::text(c.name.get_ref())),
                "a name is letters, digits, `-`, `_` and `.`, as the recipe file's name; write the lock again with `kiln lock`",
            );
        }
        if pep440_rs::Version::from_str(c.version.get_ref()).is_err() {
            bad(
                &c.version,
                format!(
                    "`{}` is not a version (PEP 440)",
                    crate::shown::text(c.version.get_ref())
                ),
                "write the lock again with `kiln lock`",
            );
        }
        if let Some(why) = source_problem(c.source.get_ref()) {
            bad(
                &c.source,
                format!("source `{}`: {why}", crate::shown::text(c.source.get_ref())),
                "a source is `sha256:<64 hex digits>`, `wheel:<64 hex digits>`, `git:<commit>`, `path:<dir>`, `index:<requirement>` or `installed`; write the lock again with `kiln lock`",
            );
        }
        for (name, v) in &c.inputs {
            let value = v.get_ref();
            let fine = match value.split_once(':') {
                Some(("sha256", h)) => is_sha256(h),
                Some(("git", r)) => is_git_rev(r),
                _ => false,
            };
            if !fine {
                bad(
                    v,
                    format!(
                        "build input `{}` = `{}`: not a `git:<commit>` or `sha256:<64 hex digits>`",
                        crate::shown::text(name),
                        crate::shown::text(value)
                    ),
                    "write the lock again with `kiln lock`",
                );
            }
        }
        // A URL kiln downloads a wheel from: its last segment must name a wheel file.
        if let Some(u) = c.wheel_url.as_ref() {
            let file = u.get_ref().rsplit('/').next().unwrap_or_default();
            if let Err(why) = crate::recipe::binaries::parse_wheel_name(file) {
                bad(u, format!("wheel_url: {why}"), "write the lock again with `kiln lock`");
            }
        }
        if let Some(w) = c.wheel_sha256.as_ref().filter(|w| !is_sha256(w.get_ref())) {
            bad(
                w,
                format!(
                    "wheel_sha256 `{}` is not 64 hex digits",
                    crate::shown::text(w.get_ref())
                ),
                "write the lock again with `kiln lock`",
            );
        }
    }
    out.sort_by_key(|b| b.span.start);
    out
}

/// What is wrong with a `source` value, if anything.
fn source_problem(source: &str) -> Option<&'static str> {
    if source == super::NOT_BY_KILN {
        return None;
    }
    let Some((kind, value)) = source.split_once(':') else {
        return Some("not one of the kinds kiln records");
    };
    match kind {
        "sha256" if !is_sha256(value) => Some("not an sdist's sha256 (64 hex digits)"),
        "wheel" if !is_sha256(value) => Some("not a wheel's sha256 (64 hex digits)"),
        "git" if !is_git_rev(value) => {
            Some("not a git commit or a plain ref name (it could be read as an option or a path)")
        }
        "path" | "index" if value.is_empty() => Some("empty"),
        "sha256" | "wheel" | "git" | "path" | "index" => None,
        _ => Some("not one of the kinds kiln records"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revs_that_git_could_take_for_options_or_paths_are_refused() {
        for ok in ["v1.0.0", "main", "release/2.14", "0123abcd", &"a".repeat(40)] {
            assert!(is_git_rev(ok), "{ok}");
        }
        for bad in [
            "--orphan=x",
            "-b",
            "",
            "a..b",
            "/etc",
            "x y",
            "HEAD@{1}",
            "a/.hidden",
            "x.lock",
            "a\\b",
            "v1^",
        ] {
            assert!(!is_git_rev(bad), "{bad}");
        }
    }

    #[test]
    fn sources_have_one_shape_each() {
        let sha = "ab".repeat(32);
        assert_eq!(source_problem(&format!("sha256:{sha}")), None);
        assert_eq!(source_problem("installed"), None);
        assert_eq!(source_problem("index:torch==2.11.0"), None);
        assert_eq!(source_problem(&format!("wheel:{sha}")), None);
        for bad in [
            "sha256:/some/dir",
            "sha256:../../dir",
            "git:--orphan=x",
            "file:/x",
            "sha256:",
            "wheel:../../x",
            "path:",
        ] {
            assert!(source_problem(bad).is_some(), "{bad}");
        }
    }
}
