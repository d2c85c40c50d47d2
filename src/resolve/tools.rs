//! The tools a build runs (`[requires] tools`), decided by the plan: each is found on `PATH`
//! (nothing to do), or brought from the wheel the recipe pins for this machine (unpacked into
//! `<cache>/tools/` by the build, its directory put on the build's `PATH` ahead of kiln's own),
//! or missing — then the step is `blocked`, naming the tool, why the build needs it and how to
//! get it. Offline, a wheel kiln has not unpacked before cannot be brought.
//!
//! It deliberately ignores the tool's version (a tool on `PATH` is the user's choice) and does
//! no download: that is `apply::tools`, once the step runs.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::recipe::{Recipe, Tool};

/// A tool kiln brings for a build: the wheel it comes from and where its executable will be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Brought {
    pub name: String,
    /// The wheel: its URL, or a local file (resolved against the recipe's directory).
    pub wheel: String,
    pub sha256: String,
    /// The executable once unpacked: `<cache>/tools/<name>-<sha>/<path>`.
    pub program: PathBuf,
    /// Where the wheel unpacks.
    #[serde(skip)]
    pub dir: PathBuf,
}

impl Brought {
    /// The directory that goes on the build's `PATH`.
    pub fn bin_dir(&self) -> &Path {
        self.program.parent().unwrap_or(&self.dir)
    }
}

/// Where kiln keeps tools it brings, and whether it may download now.
#[derive(Debug, Clone, Default)]
pub struct ToolPlace {
    /// `<cache>/tools`; `None`: kiln brings no tool (only `PATH` counts).
    pub dir: Option<PathBuf>,
    pub offline: bool,
}

/// The tools `r`'s build needs that kiln brings, or why the build cannot run (every missing tool
/// named, with how to get it).
pub fn provide(r: &Recipe, place: &ToolPlace, on_path: &dyn Fn(&str) -> bool) -> Result<Vec<Brought>, String> {
    let mut brought = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for name in &r.requires.tools {
        if on_path(name) {
            continue;
        }
        let source = r.requires.tool_sources.iter().find(|t| &t.name == name);
        match source.map(|t| bring(t, r, place)) {
            Some(Ok(b)) => brought.push(b),
            Some(Err(why)) => missing.push(why),
            None => missing.push(format!("`{name}` not on PATH")),
        }
    }
    if missing.is_empty() {
        return Ok(brought);
    }
    let mut msg = format!("{} (needed to build {})", missing.join("; "), r.name);
    for t in r
        .requires
        .tool_sources
        .iter()
        .filter(|t| !on_path(&t.name) && !brought.iter().any(|b| b.name == t.name))
    {
        if let Some(why) = &t.why {
            msg.push_str(&format!("; {} is needed because {why}", t.name));
        }
        msg.push_str(&format!("; get {}: {}", t.name, t.hint()));
    }
    Err(msg)
}

/// The tool from its wheel for this machine, or why it cannot be brought.
fn bring(t: &Tool, r: &Recipe, place: &ToolPlace) -> Result<Brought, String> {
    let machine = std::env::consts::ARCH;
    let not_here = format!("`{}` not on PATH", t.name);
    let Some(wheel) = t.wheel_for(machine) else {
        return Err(if t.wheels.is_empty() {
            not_here
        } else {
            format!("{not_here}, and the recipe pins no wheel of it for {machine}")
        });
    };
    let Some(tools) = &place.dir else {
        return Err(not_here);
    };
    let program = t
        .program(tools, wheel)
        .ok_or_else(|| format!("{not_here}, and the recipe does not say where it is in the wheel"))?;
    if place.offline && !program.is_file() {
        return Err(format!(
            "{not_here}, and offline kiln cannot bring it ({} is not there yet)",
            program.display()
        ));
    }
    let wheel_ref = match wheel.local(r.dir.as_deref()) {
        Some(p) => p.display().to_string(),
        None => wheel.url.clone(),
    };
    Ok(Brought {
        name: t.name.clone(),
        wheel: wheel_ref,
        sha256: wheel.sha256.clone(),
        dir: t.dir(tools, wheel),
        program,
    })
}

impl super::BuildSpec {
    /// Adds the tools kiln brings: their directories go on `PATH` after the build requirements'
    /// `bin` and before kiln's own `PATH`.
    pub fn bring_tools(&mut self, tools: Vec<Brought>) {
        use super::spec::{Arg, Piece};
        if tools.is_empty() {
            return;
        }
        let dirs: String = tools.iter().map(|b| format!("{}:", b.bin_dir().display())).collect();
        let path = self
            .env
            .entry("PATH".into())
            .or_insert_with(|| Arg(vec![Piece::Inherited("PATH".into())]));
        let at = path
            .0
            .iter()
            .position(|p| matches!(p, Piece::Inherited(v) if v == "PATH"))
            .unwrap_or(path.0.len());
        path.0.insert(at, Piece::Text(dirs));
        self.tools = tools;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::parse::parse;

    fn recipe(machine: &str) -> Recipe {
        let src = format!(
            "[package]\nname = \"router\"\nversion = \"1\"\n[source]\npath = \"x\"\n\
             [[requires.tools]]\nname = \"cargo\"\n\n[[requires.tools]]\nname = \"protoc\"\n\
             why = \"build.rs:21 runs it\"\ndebian = \"protobuf-compiler\"\npath = \"protoc/data/bin/protoc\"\n\
             wheels = [{{ machine = \"{machine}\", url = \"w/protoc.whl\", sha256 = \"{}\" }}]\n",
            "ab".repeat(32)
        );
        parse("router.toml", &src, Some(PathBuf::from("/recipes"))).unwrap()
    }

    fn place(offline: bool) -> ToolPlace {
        ToolPlace {
            dir: Some(PathBuf::from("/nonexistent/cache/tools")),
            offline,
        }
    }

    #[test]
    fn a_tool_on_path_is_used_as_it_is() {
        let r = recipe(std::env::consts::ARCH);
        assert_eq!(provide(&r, &place(false), &|_| true), Ok(Vec::new()));
    }

    #[test]
    fn a_missing_tool_with_a_wheel_for_this_machine_is_brought() {
        let r = recipe(std::env::consts::ARCH);
        let got = provide(&r, &place(false), &|t| t == "cargo").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].wheel, "/recipes/w/protoc.whl");
        assert_eq!(
            got[0].bin_dir(),
            Path::new("/nonexistent/cache/tools/protoc-abababababababab/protoc/data/bin")
        );
    }

    #[test]
    fn brought_tools_go_on_the_build_path_after_the_build_requirements() {
        let r = recipe(std::env::consts::ARCH);
        let brought = provide(&r, &place(false), &|t| t == "cargo").unwrap();
        let mut build = r.build.clone();
        build.requires = vec!["maturin>=1.0,<2.0".into()];
        let vars = crate::recipe::template::Vars {
            python: "/v/bin/python".into(),
            src: String::new(),
            wheel_dir: String::new(),
            jobs: 1,
            version: "1".into(),
            cuda_home: None,
            cuda_version: None,
            archs: Vec::new(),
        };
        let mut spec = super::super::BuildSpec::new(&build, &vars).unwrap();
        spec.bring_tools(brought);
        assert_eq!(
            spec.shown_env()["PATH"],
            "<build requirements>/bin:/nonexistent/cache/tools/protoc-abababababababab/protoc/data/bin:$PATH"
        );
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["tools"][0]["name"], "protoc");
        assert_eq!(json["tools"][0]["wheel"], "/recipes/w/protoc.whl");
    }

    #[test]
    fn a_tool_kiln_cannot_bring_blocks_the_build_with_how_to_get_it() {
        let other = if std::env::consts::ARCH == "x86_64" {
            "aarch64"
        } else {
            "x86_64"
        };
        let why = provide(&recipe(other), &place(false), &|t| t == "cargo").unwrap_err();
        assert!(
            why.starts_with("`protoc` not on PATH, and the recipe pins no wheel of it for"),
            "{why}"
        );
        assert!(why.contains("(needed to build router)"), "{why}");
        assert!(why.contains("protoc is needed because build.rs:21 runs it"), "{why}");
        assert!(why.contains("apt-get install protobuf-compiler"), "{why}");

        let offline = provide(&recipe(std::env::consts::ARCH), &place(true), &|t| t == "cargo").unwrap_err();
        assert!(offline.contains("offline kiln cannot bring it"), "{offline}");

        let neither = provide(&recipe(std::env::consts::ARCH), &place(false), &|_| false).unwrap_err();
        assert!(
            neither.starts_with("`cargo` not on PATH (needed to build router)"),
            "{neither}"
        );
    }
}
