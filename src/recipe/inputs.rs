//! Build inputs: the sources an upstream build would otherwise download in the middle of the
//! build (CMake `FetchContent`, a `git clone` in `setup.py`), declared in the recipe with their
//! pinned identity (a git commit, or an archive's sha256), the variables that point the upstream
//! build at a local copy, and the upstream line that does the download. kiln fetches them before
//! the build starts, like the main source.
//!
//! This module is the typed form ([`super::parse`] reads it) and the choice of the inputs a build
//! for some target archs needs. It deliberately ignores fetching (the builder's job) and what
//! the variables mean to the upstream build (the recipe says so in `why`).

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use crate::arch::Arch;

/// One declared build input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Input {
    /// Unique within the recipe; it names the input's directory and its lock entry.
    pub name: String,
    #[serde(flatten)]
    pub from: InputSource,
    /// The directory inside the fetched tree that the variables point at (`python/pkg`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdir: Option<String>,
    /// Variables of the build environment, each a value with `{path}` (the input's directory).
    pub env: BTreeMap<String, InputValue>,
    /// Only builds for one of these target archs need it; `None`: every build does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arch: Option<Vec<Arch>>,
    /// Why the build needs it: the upstream file:line that downloads it.
    pub why: String,
}

/// Where an input comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum InputSource {
    /// A git repository at a full commit (`rev`); `tag` is the name upstream gives it, checked
    /// against the mirror when the mirror has it. With a tag and no commit, the commit is the
    /// one the tag names when kiln fetches it (recorded in `kiln.json` and the lock): a recipe
    /// does that only where the commit could not be verified, and says so.
    Git {
        git: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        rev: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tag: Option<String>,
        #[serde(skip_serializing_if = "Submodules::is_none")]
        submodules: Submodules,
    },
    /// An archive (tar or zip) at a URL or local path, checked against its sha256.
    Archive { archive: String, sha256: String },
    /// Files taken from a named wheel (checked against its sha256): the member `member` (a
    /// directory when it ends in `/`, else one file) placed at `place` inside the input's
    /// directory. For sources that upstream ships only inside its own release wheel, or whose
    /// commit cannot be had: the recipe says in `why` that the files equal the pinned ones.
    Wheel {
        wheel: String,
        sha256: String,
        member: String,
        place: String,
    },
}

/// Which submodules of a git input are checked out (each from its own mirror in the cache).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Submodules {
    #[default]
    None,
    /// `submodules = true`: every one, recursively.
    All,
    /// `submodules = ["csrc/cutlass"]`: these paths (and what they hold, recursively).
    Only(Vec<String>),
}

impl Submodules {
    pub fn is_none(&self) -> bool {
        *self == Submodules::None
    }
}

impl Serialize for Submodules {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Submodules::None => s.serialize_bool(false),
            Submodules::All => s.serialize_bool(true),
            Submodules::Only(paths) => paths.serialize(s),
        }
    }
}

impl InputSource {
    /// The revision to check out: the commit, else the tag.
    pub fn git_rev(&self) -> Option<&str> {
        match self {
            InputSource::Git { rev, tag, .. } => rev.as_deref().or(tag.as_deref()),
            InputSource::Archive { .. } | InputSource::Wheel { .. } => None,
        }
    }

    /// The identity the recipe pins, as the lock and `kiln.json` record it: `git:<commit>` or
    /// `sha256:<hex>`; `None` for a git input named by its tag alone (known once fetched).
    pub fn pinned(&self) -> Option<String> {
        match self {
            InputSource::Git { rev, .. } => rev.as_ref().map(|r| format!("git:{r}")),
            InputSource::Archive { sha256, .. } | InputSource::Wheel { sha256, .. } => Some(format!("sha256:{sha256}")),
        }
    }
}

impl Input {
    /// Whether a build for `archs` needs it (every input does when no arch is named).
    pub fn needed_for(&self, archs: &[Arch]) -> bool {
        match &self.arch {
            None => true,
            Some(only) => archs.is_empty() || archs.iter().any(|a| only.contains(a)),
        }
    }
}

/// A value of an input's variable: text with `{path}` where the input's directory goes
/// (`{{` and `}}` are braces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputValue {
    raw: String,
    parts: Vec<InputPart>,
}

/// A piece of an [`InputValue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputPart {
    Lit(String),
    Path,
}

impl InputValue {
    /// Parses `raw`; the error is the byte offset and length of what is wrong, and why.
    pub fn parse(raw: &str) -> Result<InputValue, (usize, usize, String)> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut i = 0;
        let b = raw.as_bytes();
        while i < b.len() {
            let c = b[i];
            if (c == b'{' || c == b'}') && b.get(i + 1) == Some(&c) {
                lit.push(c as char);
                i += 2;
            } else if raw[i..].starts_with("{path}") {
                if !lit.is_empty() {
                    parts.push(InputPart::Lit(std::mem::take(&mut lit)));
                }
                parts.push(InputPart::Path);
                i += "{path}".len();
            } else if c == b'{' || c == b'}' {
                let len = raw[i..].find('}').map_or(1, |e| e + 1);
                let what = &raw[i..i + len];
                return Err((
                    i,
                    len,
                    format!("`{what}` in an input's env: only `{{path}}` is known here"),
                ));
            } else {
                let ch = raw[i..].chars().next().unwrap_or_default();
                lit.push(ch);
                i += ch.len_utf8();
            }
        }
        if !lit.is_empty() {
            parts.push(InputPart::Lit(lit));
        }
        if !parts.contains(&InputPart::Path) {
            return Err((0, raw.len(), "an input's variable must contain `{path}`".into()));
        }
        Ok(InputValue {
            raw: raw.to_string(),
            parts,
        })
    }

    pub fn parts(&self) -> &[InputPart] {
        &self.parts
    }

    /// The value with `path` in place of `{path}`.
    pub fn render(&self, path: &str) -> String {
        self.parts
            .iter()
            .map(|p| match p {
                InputPart::Lit(s) => s.as_str(),
                InputPart::Path => path,
            })
            .collect()
    }

    pub fn raw(&self) -> &str {
        &self.raw
    }
}

impl Serialize for InputValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_holds_the_path_once_or_more_and_nothing_else_in_braces() {
        let v = InputValue::parse("-DFETCHCONTENT_SOURCE_DIR_X={path} -DY={path}/sub {{}}").unwrap();
        assert_eq!(v.render("/w/x"), "-DFETCHCONTENT_SOURCE_DIR_X=/w/x -DY=/w/x/sub {}");
        assert_eq!(v.raw(), "-DFETCHCONTENT_SOURCE_DIR_X={path} -DY={path}/sub {{}}");
        let (at, len, why) = InputValue::parse("a {src} b").unwrap_err();
        assert_eq!((at, len), (2, 5));
        assert!(why.contains("`{src}`"), "{why}");
        assert!(
            InputValue::parse("/opt/cutlass")
                .unwrap_err()
                .2
                .contains("must contain")
        );
        assert!(InputValue::parse("{path").is_err());
    }

    #[test]
    fn an_input_named_for_some_archs_is_needed_only_by_builds_for_them() {
        let mut i = Input {
            name: "x".into(),
            from: InputSource::Archive {
                archive: "x.tar.gz".into(),
                sha256: "0".repeat(64),
            },
            subdir: None,
            env: BTreeMap::new(),
            arch: None,
            why: String::new(),
        };
        let a = |m, n| Arch { major: m, minor: n };
        assert!(i.needed_for(&[a(12, 0)]));
        i.arch = Some(vec![a(9, 0), a(10, 0)]);
        assert!(!i.needed_for(&[a(12, 0)]));
        assert!(i.needed_for(&[a(12, 0), a(9, 0)]));
        assert!(
            i.needed_for(&[]),
            "no target arch: the project's own list, which may need it"
        );
        assert_eq!(i.from.pinned(), Some(format!("sha256:{}", "0".repeat(64))));
    }
}
