//! The build inputs a CMake project downloads, read from its files: every `FetchContent_Declare`
//! and `FetchContent_Populate` that names a `GIT_REPOSITORY` or `URL`, with its tag or commit,
//! submodules and `SOURCE_SUBDIR`, the variable that points the build at a local copy instead,
//! and the file:line of each. `${VAR}` is resolved from the last `set(VAR ...)` before the use,
//! in the file, else in the files read before it.
//!
//! It owns only this scan: a tokenizer of CMake command invocations (cmake-language(7):
//! comments, bracket, quoted and unquoted arguments, nested parentheses) and a reading of those
//! invocations. It ignores control flow: every `set` counts in file order, whichever branch it
//! is in, which is why the reader is shown the line each value came from. (The `cmake-parser`
//! crate keeps raw invocations private and refuses commands it does not know, such as
//! `FetchContent_Declare`.)

use std::collections::BTreeMap;

/// One command invocation: its name as written, its arguments (quotes removed, escapes kept
/// as written), and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub name: String,
    pub args: Vec<String>,
    pub line: usize,
}

/// The command invocations of a CMake file, in order. Unbalanced input ends the scan at the
/// point it stops making sense; what came before is kept.
pub fn invocations(text: &str) -> Vec<Invocation> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'#' => i = skip_comment(b, i, &mut line),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let name = &text[start..i];
                let mut j = i;
                while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                    j += 1;
                }
                if j < b.len() && b[j] == b'(' {
                    let at = line;
                    match arguments(text, j + 1, &mut line) {
                        Some((args, end)) => {
                            out.push(Invocation {
                                name: name.to_string(),
                                args,
                                line: at,
                            });
                            i = end;
                        }
                        None => return out,
                    }
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// Skips a comment at `i` (`#...` to the line's end, or a bracket comment `#[==[...]==]`).
fn skip_comment(b: &[u8], i: usize, line: &mut usize) -> usize {
    if let Some(end) = bracket_end(b, i + 1, line) {
        return end;
    }
    let mut j = i;
    while j < b.len() && b[j] != b'\n' {
        j += 1;
    }
    j
}

/// The end of a bracket `[==[ ... ]==]` opening at `i`, if one opens there.
fn bracket_end(b: &[u8], i: usize, line: &mut usize) -> Option<usize> {
    if b.get(i) != Some(&b'[') {
        return None;
    }
    let mut j = i + 1;
    while b.get(j) == Some(&b'=') {
        j += 1;
    }
    if b.get(j) != Some(&b'[') {
        return None;
    }
    let equals = j - i - 1;
    let close: Vec<u8> = std::iter::once(b']')
        .chain(std::iter::repeat_n(b'=', equals))
        .chain(std::iter::once(b']'))
        .collect();
    let body = j + 1;
    let end = b[body..].windows(close.len()).position(|w| w == close.as_slice())? + body;
    *line += b[i..end].iter().filter(|&&c| c == b'\n').count();
    Some(end + close.len())
}

/// The arguments after an opening parenthesis at `i - 1`, and where the invocation ends.
fn arguments(text: &str, mut i: usize, line: &mut usize) -> Option<(Vec<String>, usize)> {
    let b = text.as_bytes();
    let mut args = Vec::new();
    let mut depth = 1usize;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                *line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => i = skip_comment(b, i, line),
            b'(' => {
                depth += 1;
                i += 1;
            }
            b')' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return Some((args, i));
                }
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'"' {
                    if b[j] == b'\\' {
                        j += 1;
                    }
                    if b.get(j) == Some(&b'\n') {
                        *line += 1;
                    }
                    j += 1;
                }
                args.push(text.get(start..j.min(b.len()))?.to_string());
                i = j + 1;
            }
            b'[' if bracket_end(b, i, &mut 0).is_some() => {
                let end = bracket_end(b, i, line)?;
                let open = b[i..].iter().skip(1).position(|&c| c == b'[')? + i + 2;
                let close = end - (open - i);
                args.push(text.get(open..close)?.to_string());
                i = end;
            }
            _ => {
                let start = i;
                while i < b.len() && !matches!(b[i], b' ' | b'\t' | b'\r' | b'\n' | b'(' | b')' | b'#' | b'"') {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                args.push(text.get(start..i.min(b.len()))?.to_string());
            }
        }
    }
    None
}

/// A value and the file:line it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced {
    pub value: String,
    pub at: String,
}

/// One downloaded input, as the CMake files declare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The FetchContent name (`cutlass`, `vllm-flash-attn`).
    pub name: String,
    /// `FetchContent_Declare` or `FetchContent_Populate`, with the file:line.
    pub command: String,
    pub at: String,
    pub git: Option<Sourced>,
    /// `GIT_TAG` resolved: a 40-hex commit or a tag/branch name.
    pub git_tag: Option<Sourced>,
    pub url: Option<Sourced>,
    pub url_hash: Option<String>,
    /// `GIT_SUBMODULES` as given; `None` when not given, which checks out every submodule
    /// (CMake's ExternalProject docs: "If GIT_SUBMODULES is not given, all submodules will be
    /// updated").
    pub submodules: Option<Vec<String>>,
    pub source_subdir: Option<String>,
    /// The variable a build sets to use a local copy (`DEEPGEMM_SRC_DIR`), where the file has
    /// one: the nearest `*_SRC_DIR` in an `if(...)` before the call, with its line.
    pub override_var: Option<Sourced>,
}

/// Every FetchContent download declared in `files` (path as shown, text), read in order.
pub fn fetches(files: &[(String, String)]) -> Vec<Fetch> {
    let mut global: BTreeMap<String, Sourced> = BTreeMap::new();
    let mut out = Vec::new();
    for (path, text) in files {
        let calls = invocations(text);
        let mut vars = global.clone();
        let mut last_override: Option<(usize, Sourced)> = None;
        for c in &calls {
            let lname = c.name.to_ascii_lowercase();
            if lname == "set" && c.args.len() >= 2 {
                let value = resolve(&c.args[1], &vars);
                let s = Sourced {
                    value,
                    at: format!("{path}:{}", c.line),
                };
                vars.insert(c.args[0].clone(), s.clone());
                global.insert(c.args[0].clone(), s);
            } else if lname == "if" || lname == "elseif" {
                if let Some(v) = c.args.iter().find_map(|a| src_dir_var(a)) {
                    last_override = Some((
                        c.line,
                        Sourced {
                            value: v,
                            at: format!("{path}:{}", c.line),
                        },
                    ));
                }
            } else if (lname == "fetchcontent_declare" || lname == "fetchcontent_populate")
                && let Some(f) = fetch_of(c, path, &vars, last_override.as_ref())
            {
                out.push(f);
            }
        }
    }
    out
}

/// `DEEPGEMM_SRC_DIR` in `ENV{DEEPGEMM_SRC_DIR}` or in a bare `VLLM_CUTLASS_SRC_DIR` condition.
fn src_dir_var(arg: &str) -> Option<String> {
    let name = arg
        .strip_prefix("ENV{")
        .and_then(|a| a.strip_suffix('}'))
        .unwrap_or(arg);
    (name.ends_with("_SRC_DIR") && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'))
        .then(|| name.to_string())
}

/// The keywords of FetchContent's options (CMake's FetchContent and ExternalProject docs); an
/// option's values run to the next keyword.
const KEYWORDS: &[&str] = &[
    "GIT_REPOSITORY",
    "GIT_TAG",
    "GIT_SUBMODULES",
    "GIT_SUBMODULES_RECURSE",
    "GIT_SHALLOW",
    "GIT_PROGRESS",
    "GIT_REMOTE_UPDATE_STRATEGY",
    "GIT_CONFIG",
    "URL",
    "URL_HASH",
    "URL_MD5",
    "DOWNLOAD_NO_EXTRACT",
    "SOURCE_DIR",
    "BINARY_DIR",
    "SUBBUILD_DIR",
    "SOURCE_SUBDIR",
    "QUIET",
    "EXCLUDE_FROM_ALL",
    "SYSTEM",
    "OVERRIDE_FIND_PACKAGE",
    "FIND_PACKAGE_ARGS",
    "UPDATE_DISCONNECTED",
    "PATCH_COMMAND",
    "UPDATE_COMMAND",
    "CONFIGURE_COMMAND",
    "BUILD_COMMAND",
    "INSTALL_COMMAND",
    "TEST_COMMAND",
];

fn fetch_of(
    c: &Invocation,
    path: &str,
    vars: &BTreeMap<String, Sourced>,
    last_override: Option<&(usize, Sourced)>,
) -> Option<Fetch> {
    let name = c.args.first()?.clone();
    let mut options: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut current: Option<&str> = None;
    for a in &c.args[1..] {
        if let Some(k) = KEYWORDS.iter().find(|k| **k == a.as_str()) {
            current = Some(k);
            options.entry(k).or_default();
        } else if let Some(k) = current {
            options.entry(k).or_default().push(a.clone());
        }
    }
    let first = |k: &str| options.get(k).and_then(|v| v.first()).cloned();
    // A value and where it came from: the variable's `set` line when it is one, else the call's.
    let at = format!("{path}:{}", c.line);
    let sourced = |raw: String| {
        let from = single_var(&raw).and_then(|v| vars.get(v)).map(|s| s.at.clone());
        Sourced {
            value: resolve(&raw, vars),
            at: from.unwrap_or_else(|| at.clone()),
        }
    };
    let git = first("GIT_REPOSITORY").map(&sourced);
    let url = first("URL").map(&sourced);
    if git.is_none() && url.is_none() {
        return None;
    }
    // The override must be this call's: declared within the 60 lines before it.
    let override_var = last_override
        .filter(|(line, _)| c.line >= *line && c.line - line <= 60)
        .map(|(_, s)| s.clone());
    Some(Fetch {
        name,
        command: c.name.clone(),
        at: at.clone(),
        git,
        git_tag: first("GIT_TAG").map(&sourced),
        url,
        url_hash: first("URL_HASH").map(|h| resolve(&h, vars)),
        submodules: options
            .get("GIT_SUBMODULES")
            .map(|v| v.iter().map(|s| resolve(s, vars)).filter(|s| !s.is_empty()).collect()),
        source_subdir: first("SOURCE_SUBDIR").map(|s| resolve(&s, vars)),
        override_var,
    })
}

/// `VAR` when `raw` is exactly `${VAR}`.
fn single_var(raw: &str) -> Option<&str> {
    raw.strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .filter(|v| !v.contains(['$', '{']))
}

/// `raw` with each `${VAR}` replaced by its value where known (left as written otherwise).
fn resolve(raw: &str, vars: &BTreeMap<String, Sourced>) -> String {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find('}') {
            Some(j) => {
                let name = &after[..j];
                match vars.get(name) {
                    Some(v) => out.push_str(&v.value),
                    None => out.push_str(&rest[i..i + 3 + j]),
                }
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invocations_read_quoted_bracket_and_nested_arguments_with_their_lines() {
        let text = "# a comment (with parens\nset(A \"x y\" ) #[[ bracket\ncomment ]]\nif (DEFINED ENV{X_SRC_DIR})\n  FetchContent_Declare(\n    n GIT_REPOSITORY ${R} # trailing\n    GIT_TAG [=[v1]=])\nendif()\n";
        let calls = invocations(text);
        let names: Vec<(&str, usize)> = calls.iter().map(|c| (c.name.as_str(), c.line)).collect();
        assert_eq!(
            names,
            [("set", 2), ("if", 4), ("FetchContent_Declare", 5), ("endif", 8)]
        );
        assert_eq!(calls[0].args, ["A", "x y"]);
        assert_eq!(calls[1].args, ["DEFINED", "ENV{X_SRC_DIR}"]);
        assert_eq!(calls[2].args, ["n", "GIT_REPOSITORY", "${R}", "GIT_TAG", "v1"]);
    }

    #[test]
    fn a_fetch_takes_its_tag_from_the_last_set_before_it_and_names_its_override() {
        let top = ("CMakeLists.txt".to_string(), "set(REV \"v4.7.1\")\n".to_string());
        let dep = (
            "cmake/dep.cmake".to_string(),
            "if (DEFINED ENV{DEP_SRC_DIR})\n  set(DEP_SRC_DIR $ENV{DEP_SRC_DIR})\nendif()\nif(DEP_SRC_DIR)\n  FetchContent_Declare(dep SOURCE_DIR ${DEP_SRC_DIR})\nelse()\n  set(REPO \"https://example.com/a.git\")\n  set(REPO \"https://example.com/dep.git\")\n  FetchContent_Populate(dep\n    GIT_REPOSITORY \"${REPO}\"\n    GIT_TAG ${REV}\n    GIT_SUBMODULES \"third/a\" \"third/b\"\n    SOURCE_SUBDIR python/dep)\nendif()\n"
                .to_string(),
        );
        let f = fetches(&[top, dep]);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.name, "dep");
        assert_eq!(f.at, "cmake/dep.cmake:9");
        let git = f.git.as_ref().unwrap();
        assert_eq!(
            (git.value.as_str(), git.at.as_str()),
            ("https://example.com/dep.git", "cmake/dep.cmake:8")
        );
        let tag = f.git_tag.as_ref().unwrap();
        assert_eq!((tag.value.as_str(), tag.at.as_str()), ("v4.7.1", "CMakeLists.txt:1"));
        assert_eq!(f.submodules, Some(vec!["third/a".to_string(), "third/b".to_string()]));
        assert_eq!(f.source_subdir.as_deref(), Some("python/dep"));
        let o = f.override_var.as_ref().unwrap();
        assert_eq!((o.value.as_str(), o.at.as_str()), ("DEP_SRC_DIR", "cmake/dep.cmake:4"));
    }
}
