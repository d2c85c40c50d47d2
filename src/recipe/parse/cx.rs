//! The walk's shared state and typed reads: every read checks the type, reports a wrong one at
//! the value's position and returns `None`, so a table's reader can go on and find the next problem.
//!
//! Messages are built only when there is a problem; a recipe without problems allocates nothing
//! here beyond the values it keeps. It deliberately knows nothing about which keys a recipe has:
//! the readers of each table decide that.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use pep440_rs::VersionSpecifiers;
use pep508_rs::{Requirement, VerbatimUrl};

use super::doc::{Item, Table};
use crate::recipe::diag::Diagnostic;
use crate::recipe::template::{Template, Var};

/// One file being read, and the problems found in it so far.
pub(super) struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
    pub diags: Vec<Diagnostic>,
}

/// A string value with where it was written.
#[derive(Clone)]
pub(super) struct At<'a> {
    pub value: &'a str,
    pub span: Option<Range<usize>>,
}

impl<'a> At<'a> {
    fn of(item: Item<'a>, value: &'a str) -> At<'a> {
        At {
            value,
            span: item.span(),
        }
    }
}

impl<'a> Ctx<'a> {
    pub fn new(file: &'a str, src: &'a str) -> Self {
        Ctx {
            file,
            src,
            diags: Vec::new(),
        }
    }

    /// The text of the file at `r`, when `r` is inside it.
    pub fn text(&self, r: Range<usize>) -> Option<&'a str> {
        self.src.get(r)
    }

    /// Reports a problem at `span`; `help` says how to fix it (every recipe error has one).
    pub fn error(&mut self, span: Option<Range<usize>>, message: String, help: impl Into<String>) {
        self.diags
            .push(Diagnostic::new(self.file, self.src, span, message, help));
    }

    /// Reports each key of `t` not in `allowed`; true when there was none.
    pub fn check_keys(&mut self, t: Table<'_>, section: &str, allowed: &[&str]) -> bool {
        if t.keys_within(allowed) {
            return true;
        }
        let mut clean = true;
        for e in t.entries() {
            if !allowed.contains(&e.key) {
                clean = false;
                let place = if section.is_empty() {
                    "at the top level".to_string()
                } else {
                    format!("in [{section}]")
                };
                self.error(
                    Some(e.key_span),
                    format!("unknown key `{}` {place}", e.key),
                    format!("expected one of: {}", allowed.join(", ")),
                );
            }
        }
        clean
    }

    pub fn wrong_type(&mut self, item: Item<'_>, what: &str, key: &str, section: &str) {
        let got = item.type_name();
        self.error(
            item.span(),
            format!("`{}` must be {what}, found {got}", dotted(section, key)),
            format!("write `{key}` as {what}"),
        );
    }

    pub fn table<'t>(&mut self, t: Table<'t>, key: &str, section: &str) -> Option<Table<'t>> {
        let item = t.get(key)?;
        let table = item.as_table();
        if table.is_none() {
            self.wrong_type(item, "a table", key, section);
        }
        table
    }

    pub fn string<'t>(&mut self, t: Table<'t>, key: &str, section: &str) -> Option<At<'t>> {
        let item = t.get(key)?;
        match item.as_str() {
            Some(s) => Some(At::of(item, s)),
            None => {
                self.wrong_type(item, "a string", key, section);
                None
            }
        }
    }

    pub fn bool(&mut self, t: Table<'_>, key: &str, section: &str) -> Option<bool> {
        let item = t.get(key)?;
        let b = item.as_bool();
        if b.is_none() {
            self.wrong_type(item, "true or false", key, section);
        }
        b
    }

    pub fn strings<'t>(&mut self, t: Table<'t>, key: &str, section: &str) -> Option<Vec<At<'t>>> {
        let item = t.get(key)?;
        let Some(arr) = item.as_array() else {
            self.wrong_type(item, "an array of strings", key, section);
            return None;
        };
        let mut out = Vec::new();
        for v in arr {
            match v.as_str() {
                Some(s) => out.push(At::of(v, s)),
                None => self.error(
                    v.span(),
                    format!(
                        "`{}` must be an array of strings, found {} in it",
                        dotted(section, key),
                        v.type_name()
                    ),
                    format!("quote it: `{key} = [\"...\"]`"),
                ),
            }
        }
        Some(out)
    }

    /// Like [`Ctx::string`], reporting a missing key at `header`.
    pub fn required<'t>(
        &mut self,
        t: Table<'t>,
        key: &str,
        section: &str,
        header: Option<Range<usize>>,
    ) -> Option<At<'t>> {
        if !t.contains(key) {
            let fix = format!(
                "add `{key} = \"...\"` to {}",
                if section.is_empty() {
                    "the file".to_string()
                } else {
                    format!("[{section}]")
                }
            );
            self.error(header, format!("missing key `{}`", dotted(section, key)), fix);
            return None;
        }
        self.string(t, key, section)
    }

    /// Parses a template, pointing inside the string when it was written without escapes.
    pub fn template(&mut self, s: &At<'_>) -> Option<Template> {
        match Template::parse(s.value) {
            Ok(t) => Some(t),
            Err(e) => {
                let span = s.span.clone().map(|sp| {
                    let inner = sp.start + 1..sp.end.saturating_sub(1);
                    if self.src.get(inner.clone()) == Some(s.value) {
                        inner.start + e.offset..inner.start + e.offset + e.len
                    } else {
                        sp
                    }
                });
                self.error(
                    span,
                    e.message,
                    format!("known variables: {}", Var::all_names().join(", ")),
                );
                None
            }
        }
    }

    pub fn semver_req(&mut self, s: &At<'_>, what: &str) -> Option<semver::VersionReq> {
        match semver::VersionReq::parse(s.value) {
            Ok(r) => Some(r),
            Err(e) => {
                self.error(
                    s.span.clone(),
                    format!("bad version requirement `{}` for {what}", s.value),
                    format!("{e}; expected something like `>=12.8`"),
                );
                None
            }
        }
    }

    /// PEP 440 specifiers; empty for `""` and `"*"`. `what` names the value in the message.
    pub fn specifiers(&mut self, s: &At<'_>, what: fmt::Arguments<'_>) -> Option<VersionSpecifiers> {
        let text = s.value.trim();
        if text.is_empty() || text == "*" {
            return Some(VersionSpecifiers::from_iter(std::iter::empty()));
        }
        match VersionSpecifiers::from_str(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.error(
                    s.span.clone(),
                    format!("bad version specifier `{}` for {what}", s.value),
                    format!(
                        "{}; expected PEP 440 specifiers such as `>=2.7`, `==0.7.4` or `>=0.6,<0.8`",
                        first_line(&e.to_string())
                    ),
                );
                None
            }
        }
    }

    /// The array of tables under `key` of `t` (`[[section]]`), each read by `one`; an entry whose
    /// name (`name_of`) an earlier one has is reported at its `name` with what `twice` gives
    /// for that name (the message and the fix).
    pub fn named_tables<T>(
        &mut self,
        t: Table<'_>,
        key: &str,
        section: &str,
        mut one: impl FnMut(&mut Self, Table<'_>, Range<usize>) -> Option<T>,
        name_of: impl Fn(&T) -> &str,
        twice: impl Fn(&str) -> (String, &'static str),
    ) -> Vec<T> {
        let mut out: Vec<T> = Vec::new();
        let Some(item) = t.get(key) else {
            return out;
        };
        let Some(tables) = item.as_array_of_tables() else {
            let parent = section.strip_suffix(&format!(".{key}")).unwrap_or(section);
            self.wrong_type(item, &format!("an array of tables ([[{section}]])"), key, parent);
            return out;
        };
        for (table, header) in tables {
            let Some(entry) = one(self, table, header) else {
                continue;
            };
            if out.iter().any(|o| name_of(o) == name_of(&entry)) {
                let (message, fix) = twice(name_of(&entry));
                self.error(table.get("name").and_then(|i| i.span()), message, fix);
                continue;
            }
            out.push(entry);
        }
        out
    }

    /// The GPU archs listed under `key`, each bad one reported where it is written.
    pub fn archs(&mut self, t: Table<'_>, key: &str, section: &str) -> Option<Vec<crate::arch::Arch>> {
        let list = self.strings(t, key, section)?;
        let mut out = Vec::with_capacity(list.len());
        for a in list {
            match a.value.parse::<crate::arch::Arch>() {
                Ok(x) => out.push(x),
                Err(e) => self.error(
                    a.span,
                    e.to_string(),
                    "write an arch as `12.0`, `9.0` or `sm_120` (major.minor compute capability)",
                ),
            }
        }
        Some(out)
    }
}

/// The first line of a library's error message, without a trailing colon.
pub(super) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s).trim_end_matches(':')
}

/// `section.key`, or `key` at the top level.
pub(super) fn dotted(section: &str, key: &str) -> String {
    if section.is_empty() {
        key.to_string()
    } else {
        format!("{section}.{key}")
    }
}

/// A PEP 508 requirement, or what is wrong with it (first line of the parser's message).
///
/// pep508_rs 0.9.2 panics (instead of returning an error) on a name that ends in `-`, `.` or `_`
/// and is followed by more text, as in `torch-==2.7`; that case is answered here first, in the
/// words pep508_rs uses for the same name at the end of the text.
pub(super) fn requirement(s: &str) -> Result<Requirement<VerbatimUrl>, String> {
    let t = s.trim_start();
    let name_len = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        .unwrap_or(t.len());
    let name = &t[..name_len];
    if name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name_len < t.len()
        && let Some(last @ ('.' | '-' | '_')) = name.chars().last()
    {
        return Err(format!(
            "Package name must end with an alphanumeric character, not '{last}'"
        ));
    }
    Requirement::from_str(s).map_err(|e| first_line(&e.to_string()).to_string())
}
