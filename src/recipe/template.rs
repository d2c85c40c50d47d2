//! Template strings in recipes: `{python}`, `{src}`, `{arch.flashinfer}`, `{{` for a brace.
//!
//! Parsing happens when a recipe is loaded, so an unknown variable is a recipe error with a
//! position, never a surprise in the middle of a build. Rendering takes the values from a
//! [`Vars`]; a value that cannot be known (an arch spelling without a toolkit) is an error that
//! the planner turns into a `blocked` step. It deliberately ignores shell quoting: commands are
//! argument lists and never go through a shell.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::arch::{self, Arch, Dialect, DialectError};

/// One variable a template may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// The target interpreter.
    Python,
    /// The unpacked source tree.
    Src,
    /// Where the wheel must be written.
    WheelDir,
    /// Parallel compile jobs chosen for this build.
    Jobs,
    /// The version being built.
    Version,
    /// The CUDA toolkit root.
    CudaHome,
    /// The target archs in a project's spelling.
    Arch(Dialect),
}

impl Var {
    fn parse(name: &str) -> Option<Var> {
        Some(match name {
            "python" => Var::Python,
            "src" => Var::Src,
            "wheel_dir" => Var::WheelDir,
            "jobs" => Var::Jobs,
            "version" => Var::Version,
            "cuda_home" => Var::CudaHome,
            _ => Var::Arch(Dialect::from_name(name.strip_prefix("arch.")?)?),
        })
    }

    /// Every name a template may use, for error messages and docs.
    pub fn all_names() -> Vec<String> {
        let mut v: Vec<String> = ["python", "src", "wheel_dir", "jobs", "version", "cuda_home"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(Dialect::ALL.iter().map(|d| format!("arch.{}", d.name())));
        v
    }
}

/// A piece of a template: literal text or a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    Var(Var),
}

/// A parsed template string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    raw: String,
    parts: Vec<Part>,
}

/// A problem in a template string; `offset` is a byte offset into the string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub len: usize,
    pub message: String,
}

impl Template {
    pub fn parse(raw: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = raw;
        let mut offset = 0;
        while let Some(i) = rest.find(['{', '}']) {
            lit.push_str(&rest[..i]);
            let c = rest.as_bytes()[i];
            let after = &rest[i + 1..];
            if after.as_bytes().first() == Some(&c) {
                lit.push(c as char);
                rest = &after[1..];
                offset += i + 2;
                continue;
            }
            if c == b'}' {
                return Err(TemplateError {
                    offset: offset + i,
                    len: 1,
                    message: "unmatched `}` in template (write `}}` for a brace)".into(),
                });
            }
            let Some(end) = after.find('}') else {
                return Err(TemplateError {
                    offset: offset + i,
                    len: 1,
                    message: "unclosed `{` in template (write `{{` for a brace)".into(),
                });
            };
            let name = &after[..end];
            let var = Var::parse(name).ok_or_else(|| TemplateError {
                offset: offset + i,
                len: end + 2,
                message: format!("unknown template variable `{{{name}}}`"),
            })?;
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Var(var));
            rest = &after[end + 1..];
            offset += i + end + 2;
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Template {
            raw: raw.to_string(),
            parts,
        })
    }

    /// Its pieces in order, for a caller that fills some variables later (the build spec).
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The template as written in the recipe.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Fills in the variables.
    pub fn render(&self, vars: &Vars) -> Result<String, DialectError> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Var(v) => out.push_str(&vars.get(*v)?),
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Serialize for Template {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

/// The values templates are rendered with.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    pub python: String,
    pub src: String,
    pub wheel_dir: String,
    pub jobs: usize,
    pub version: String,
    pub cuda_home: Option<String>,
    pub cuda_version: Option<semver::Version>,
    pub archs: Vec<Arch>,
}

impl Vars {
    /// The value of one variable.
    pub fn get(&self, v: Var) -> Result<String, DialectError> {
        Ok(match v {
            Var::Python => self.python.clone(),
            Var::Src => self.src.clone(),
            Var::WheelDir => self.wheel_dir.clone(),
            Var::Jobs => self.jobs.to_string(),
            Var::Version => self.version.clone(),
            Var::CudaHome => self.cuda_home.clone().unwrap_or_default(),
            Var::Arch(d) => arch::render(d, &self.archs, self.cuda_version.as_ref())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_variables_and_escapes() {
        let t = Template::parse("{python} -c 'x={{1}}' -j{jobs} {arch.flashinfer}").unwrap();
        let vars = Vars {
            python: "/v/bin/python".into(),
            jobs: 3,
            cuda_version: Some(semver::Version::new(13, 0, 0)),
            archs: vec![Arch { major: 12, minor: 0 }],
            ..Vars::default()
        };
        assert_eq!(t.render(&vars).unwrap(), "/v/bin/python -c 'x={1}' -j3 12.0f");
    }

    #[test]
    fn unknown_variable_has_its_offset() {
        let e = Template::parse("a {arch.tensorrt} b").unwrap_err();
        assert_eq!((e.offset, e.len), (2, 15));
        assert_eq!(e.message, "unknown template variable `{arch.tensorrt}`");
        assert_eq!(Template::parse("x {src").unwrap_err().offset, 2);
        assert_eq!(Template::parse("x } y").unwrap_err().offset, 2);
    }
}
