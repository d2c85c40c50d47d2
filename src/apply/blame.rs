//! Whose fault a failed verification is: the wheel's own files, or something outside them. A
//! wheel whose failure is outside it (a missing or broken dependency, a dependency install that
//! failed, a verification killed from outside) is worth keeping: compiling it again would give
//! the same wheel. One that fails in its own files is not.
//!
//! Decided from facts only: the files the wheel holds (its zip entries, which its `RECORD`
//! lists) against the module each failed import was for, the module an `ImportError` names (its
//! `name`) and the file it could not load (its `path`), and whether the import was killed. An
//! import that failed inside the wheel's own modules with nothing naming another module (a
//! `raise` of its own, an extension that does not load, a smoke test that fails) is the wheel's.
//! It deliberately ignores exception messages and traceback text: those are for people.

use std::path::Path;

use crate::probe::python::ImportResult;

/// What went wrong, as the step saw it, before the wheel's files are looked at.
#[derive(Debug)]
pub(super) enum Fault {
    /// The wheel's own doing, and why (it did not install, its smoke test failed).
    Own(String),
    /// Something outside the wheel, and what.
    Outside(String),
    /// These imports failed (module, result): the wheel's files decide.
    Imports(Vec<(String, ImportResult)>),
}

/// The verdict on a failed verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Blame {
    /// The wheel's own files fail: it is not kept.
    Own(String),
    /// Something outside the wheel fails: it is kept, unverified.
    Outside(String),
}

/// The verdict on `fault` for `wheel`.
pub(super) fn judge(fault: Fault, wheel: &Path) -> Blame {
    match fault {
        Fault::Own(why) => Blame::Own(why),
        Fault::Outside(why) => Blame::Outside(why),
        Fault::Imports(failed) => match WheelFiles::read(wheel) {
            Ok(files) => files.judge_imports(&failed),
            Err(e) => Blame::Own(format!("the files of {} cannot be read: {e}", wheel.display())),
        },
    }
}

/// The paths a wheel installs, relative to site-packages (`.data/purelib/` and `.data/platlib/`
/// lifted to the top; its other `.data` and its `.dist-info` left out).
#[derive(Debug)]
pub(super) struct WheelFiles {
    name: String,
    files: Vec<String>,
}

impl WheelFiles {
    pub(super) fn read(wheel: &Path) -> Result<WheelFiles, String> {
        let file = std::fs::File::open(wheel).map_err(|e| e.to_string())?;
        let zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| e.to_string())?;
        let name = wheel.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let entries: Vec<String> = zip
            .file_names()
            .map(|n| n.map(|n| n.into_owned()))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        Ok(WheelFiles::of(name, entries.iter().map(String::as_str)))
    }

    fn of<'a>(name: String, entries: impl Iterator<Item = &'a str>) -> WheelFiles {
        let files = entries
            .filter(|e| !e.ends_with('/'))
            .filter_map(|e| {
                let (top, rest) = e.split_once('/').unwrap_or(("", e));
                if top.ends_with(".dist-info") {
                    return None;
                }
                if top.ends_with(".data") {
                    let lib = rest.strip_prefix("purelib/").or_else(|| rest.strip_prefix("platlib/"));
                    return lib.map(str::to_string);
                }
                Some(e.to_string())
            })
            .collect();
        WheelFiles { name, files }
    }

    /// Whether the dotted module `module` is the wheel's: a package of its own holds it (a
    /// directory with `__init__.py`), or its module file (`a/b.py`, `a/b.<abi>.so`) is there.
    /// A namespace package the wheel only adds to is followed down to the next level.
    fn holds_module(&self, module: &str) -> bool {
        let parts: Vec<&str> = module.split('.').collect();
        for i in 1..=parts.len() {
            let prefix = parts[..i].join("/");
            let module_file = |f: &&String| {
                f.strip_prefix(&prefix)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|ext| {
                        !ext.contains('/') && (ext == "py" || ext.ends_with("so") || ext.ends_with("pyd"))
                    })
            };
            if self.files.iter().any(|f| module_file(&f)) || self.files.contains(&format!("{prefix}/__init__.py")) {
                return true;
            }
            let dir = format!("{prefix}/");
            if !self.files.iter().any(|f| f.starts_with(&dir)) {
                return false;
            }
        }
        true
    }

    /// Whether `path` (absolute, as an `ImportError` names it) is one of the wheel's files.
    fn holds_file(&self, path: &str) -> bool {
        self.files
            .iter()
            .any(|f| path.strip_suffix(f.as_str()).is_some_and(|p| p.ends_with('/')))
    }

    /// The verdict on failed imports: outside only when every one of them is.
    fn judge_imports(&self, failed: &[(String, ImportResult)]) -> Blame {
        let mut outside = Vec::new();
        for (module, res) in failed {
            let error = res.error.as_deref().unwrap_or("?");
            let not_ours = |what: &str| Blame::Outside(format!("{error}, and {what} is not part of {}", self.name));
            let why = if res.killed {
                Blame::Outside(format!("import {module} was killed from outside ({error})"))
            } else if !self.holds_module(module) {
                not_ours(module)
            } else if let Some(file) = &res.error_file {
                if self.holds_file(file) {
                    Blame::Own(format!("{file} is the wheel's own file"))
                } else {
                    not_ours(file)
                }
            } else if let Some(missing) = res.error_module.as_deref().filter(|m| !self.holds_module(m)) {
                not_ours(missing)
            } else {
                Blame::Own(format!("import {module} failed in the wheel's own modules"))
            };
            match why {
                Blame::Own(why) => return Blame::Own(why),
                // Imports that fail for one reason (a package and its submodule) say it once.
                Blame::Outside(why) if !outside.contains(&why) => outside.push(why),
                Blame::Outside(_) => {}
            }
        }
        Blame::Outside(outside.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> WheelFiles {
        WheelFiles::of(
            "pk-1.0-cp311-cp311-linux_x86_64.whl".into(),
            [
                "pk/__init__.py",
                "pk/_x.cpython-311-x86_64-linux-gnu.so",
                "single.py",
                "nvidia/mine/__init__.py",
                "pk-1.0.data/platlib/plat/__init__.py",
                "pk-1.0.data/scripts/tool",
                "pk-1.0.dist-info/RECORD",
            ]
            .into_iter(),
        )
    }

    fn failed(error: &str, module: Option<&str>, file: Option<&str>) -> ImportResult {
        ImportResult {
            ok: false,
            error: Some(error.into()),
            traceback: None,
            file: None,
            seconds: 0.1,
            error_module: module.map(str::to_string),
            error_file: file.map(str::to_string),
            killed: false,
            loaded: Vec::new(),
        }
    }

    #[test]
    fn modules_are_the_wheels_by_its_packages_and_module_files() {
        let f = files();
        for m in ["pk", "pk._x", "pk.anything.below", "single", "plat", "nvidia.mine.sub"] {
            assert!(f.holds_module(m), "{m}");
        }
        // Another wheel's part of a namespace package, or no part of the wheel at all.
        for m in ["nvidia.cudnn", "six", "pk-1", "tool", "_x"] {
            assert!(!f.holds_module(m), "{m}");
        }
        assert!(f.holds_file("/v/lib/python3.11/site-packages/pk/_x.cpython-311-x86_64-linux-gnu.so"));
        assert!(!f.holds_file("/v/lib/python3.11/site-packages/torch/_C.so"));
    }

    #[test]
    fn a_module_the_wheel_lacks_is_outside_it_and_its_own_failures_are_its_own() {
        let f = files();
        let judge = |module: &str, r: ImportResult| f.judge_imports(&[(module.to_string(), r)]);
        let missing = failed("ModuleNotFoundError: No module named 'six'", Some("six"), None);
        assert!(
            matches!(judge("pk", missing), Blame::Outside(w) if w.contains("'six', and six is not part of pk-1.0-cp311")),
        );
        // Its own extension does not load: the name is short, the file is the wheel's.
        let so = "/v/site-packages/pk/_x.cpython-311-x86_64-linux-gnu.so";
        let undefined = failed(&format!("ImportError: {so}: undefined symbol: f"), Some("_x"), Some(so));
        assert!(matches!(judge("pk._x", undefined), Blame::Own(_)));
        // A module of its own that is not there, or a raise of its own.
        let own_missing = failed("ModuleNotFoundError: No module named 'pk._y'", Some("pk._y"), None);
        assert!(matches!(judge("pk", own_missing), Blame::Own(_)));
        assert!(matches!(
            judge("pk", failed("ImportError: broken", None, None)),
            Blame::Own(_)
        ));
        // Another distribution's file that does not load, or another component's import.
        let torch = failed(
            "ImportError: libcudnn.so.9: cannot open",
            Some("torch._C"),
            Some("/v/site-packages/torch/_C.so"),
        );
        assert!(matches!(judge("pk", torch.clone()), Blame::Outside(_)));
        assert!(matches!(
            judge("torch", failed("RuntimeError: x", None, None)),
            Blame::Outside(_)
        ));
        // Killed from outside.
        let killed = ImportResult {
            killed: true,
            ..failed("crashed the interpreter (signal 9)", None, None)
        };
        assert!(matches!(judge("pk", killed), Blame::Outside(_)));
        // One own failure among outside ones: the wheel's.
        let both = [
            ("torch".to_string(), torch),
            ("pk".to_string(), failed("ImportError: broken", None, None)),
        ];
        assert!(matches!(f.judge_imports(&both), Blame::Own(_)));
    }
}
