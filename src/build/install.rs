//! Installing wheels into the target environment, and putting it back exactly as it was when a
//! step fails: before kiln replaces a distribution it copies every file its `RECORD` lists; on
//! failure it uninstalls what it installed and copies those files back.
//!
//! Installs go through `uv pip` when uv is on PATH, else `python -m pip`; kiln never edits
//! site-packages itself except to restore a backup. Offline, a local directory of wheels (the
//! wheelhouse a bundle brings) is the only place third-party wheels come from. A kiln killed
//! between backup and proof is put back by the next one, from the journal (`super::journal`).

use std::path::{Path, PathBuf};

use crate::probe::python::Dist;
use crate::process::{Cmd, CommandFailed};

/// The program that installs wheels, and whether it may reach a package index.
#[derive(Debug, Clone)]
pub struct Installer {
    tool: Tool,
    offline: bool,
    find_links: Option<PathBuf>,
}

#[derive(Debug, Clone)]
enum Tool {
    Uv(PathBuf),
    Pip,
}

impl Installer {
    /// uv when it is on PATH (and `KILN_NO_UV` is unset), else pip.
    pub fn detect() -> Installer {
        let tool = match which::which("uv") {
            Ok(uv) if std::env::var_os("KILN_NO_UV").is_none() => Tool::Uv(uv),
            _ => Tool::Pip,
        };
        Installer {
            tool,
            offline: false,
            find_links: None,
        }
    }

    /// No index: uv installs from its own cache (`--offline`), pip only local files (`--no-index`).
    pub fn offline(mut self, offline: bool) -> Installer {
        self.offline = offline;
        self
    }

    /// Offline, wheels are also taken from `dir` (`--find-links`): with it, uv no longer reads its
    /// index cache (`--no-index`), so what is installed comes from that directory alone.
    pub fn find_links(mut self, dir: Option<PathBuf>) -> Installer {
        self.find_links = dir;
        self
    }

    pub fn name(&self) -> &'static str {
        match (&self.tool, self.offline) {
            (Tool::Uv(_), false) => "uv pip",
            (Tool::Uv(_), true) => "uv pip --offline",
            (Tool::Pip, false) => "pip",
            (Tool::Pip, true) => "pip --no-index",
        }
    }

    fn no_index(&self, c: Cmd) -> Cmd {
        if !self.offline {
            return c;
        }
        let c = match (&self.tool, &self.find_links) {
            (Tool::Uv(_), None) => c.arg("--offline"),
            (Tool::Uv(_), Some(_)) => c.args(["--offline", "--no-index"]),
            (Tool::Pip, _) => c.arg("--no-index"),
        };
        match &self.find_links {
            Some(dir) => c.arg("--find-links").arg(dir.display().to_string()),
            None => c,
        }
    }

    /// `install` of `what` (wheel paths or requirements), replacing what is there.
    pub fn install(
        &self,
        python: &Path,
        what: &[String],
        deps: bool,
        constraints: Option<&Path>,
        index_url: Option<&str>,
    ) -> Cmd {
        let py = python.display().to_string();
        let mut c = match &self.tool {
            Tool::Uv(uv) => {
                Cmd::new(uv.display().to_string()).args(["pip", "install", "--python", py.as_str(), "--reinstall"])
            }
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "install", "--force-reinstall", "--no-input"]),
        };
        c = self.no_index(c);
        if !deps {
            c = c.arg("--no-deps");
        }
        if let Some(cons) = constraints {
            c = c.arg("--constraint").arg(cons.display().to_string());
        }
        if let Some(u) = index_url {
            c = c.arg("--index-url").arg(u);
        }
        c.args(what.iter().cloned())
    }

    /// `install` of what `what` needs and the environment lacks (its runtime dependencies),
    /// without reinstalling anything present, within `constraints`.
    pub fn install_missing(&self, python: &Path, what: &[String], constraints: &Path, index_url: Option<&str>) -> Cmd {
        let py = python.display().to_string();
        let mut c = match &self.tool {
            Tool::Uv(uv) => Cmd::new(uv.display().to_string()).args(["pip", "install", "--python", py.as_str()]),
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "install", "--no-input"]),
        };
        c = self.no_index(c);
        c = c.arg("--constraint").arg(constraints.display().to_string());
        if let Some(u) = index_url {
            c = c.arg("--index-url").arg(u);
        }
        c.args(what.iter().cloned())
    }

    /// Installs `reqs` into a private directory (`--target`), for build-time requirements.
    pub fn install_target(&self, python: &Path, reqs: &[String], target: &Path) -> Cmd {
        let py = python.display().to_string();
        let t = target.display().to_string();
        let c = match &self.tool {
            Tool::Uv(uv) => Cmd::new(uv.display().to_string()).args([
                "pip",
                "install",
                "--python",
                py.as_str(),
                "--target",
                t.as_str(),
            ]),
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "install", "--no-input", "--target", t.as_str()]),
        };
        self.no_index(c).args(reqs.iter().cloned())
    }

    pub fn uninstall(&self, python: &Path, dist: &str) -> Cmd {
        let py = python.display().to_string();
        match &self.tool {
            Tool::Uv(uv) => {
                Cmd::new(uv.display().to_string()).args(["pip", "uninstall", "--python", py.as_str(), dist])
            }
            Tool::Pip => Cmd::new(py.as_str()).args(["-m", "pip", "uninstall", "-y", dist]),
        }
    }
}

/// Copies of the files of one installed distribution (written into the install journal, so a
/// later kiln can put them back).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Backup {
    dist: String,
    files: Vec<(PathBuf, PathBuf)>,
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("cannot back up {dist}: {detail}")]
    Backup { dist: String, detail: String },
    #[error("cannot restore {dist}: {detail}")]
    Restore { dist: String, detail: String },
    #[error(transparent)]
    Command(#[from] CommandFailed),
}

impl Backup {
    /// Copies every file `dist`'s RECORD lists into `dir`. `None` when nothing is installed.
    pub fn take(dist: Option<&Dist>, dir: &Path) -> Result<Option<Backup>, BackupError> {
        let Some(d) = dist else { return Ok(None) };
        let fail = |detail: String| BackupError::Backup {
            dist: d.name.clone(),
            detail,
        };
        let (Some(info), Some(loc)) = (&d.dist_info, &d.location) else {
            return Err(fail("its metadata directory is unknown".into()));
        };
        let record =
            std::fs::read_to_string(Path::new(info).join("RECORD")).map_err(|e| fail(format!("no RECORD: {e}")))?;
        std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        let mut files = Vec::new();
        for (i, line) in record.lines().enumerate() {
            let Some(rel) = record_path(line) else { continue };
            let orig = Path::new(loc).join(rel);
            if !orig.is_file() {
                continue;
            }
            let copy = dir.join(i.to_string());
            std::fs::copy(&orig, &copy).map_err(|e| fail(format!("{}: {e}", orig.display())))?;
            files.push((orig, copy));
        }
        Ok(Some(Backup {
            dist: d.name.clone(),
            files,
        }))
    }

    /// Puts the files back (after the new version was uninstalled).
    pub fn restore(&self) -> Result<(), BackupError> {
        for (orig, copy) in &self.files {
            if let Some(p) = orig.parent() {
                std::fs::create_dir_all(p).map_err(|e| BackupError::Restore {
                    dist: self.dist.clone(),
                    detail: e.to_string(),
                })?;
            }
            std::fs::copy(copy, orig).map_err(|e| BackupError::Restore {
                dist: self.dist.clone(),
                detail: format!("{}: {e}", orig.display()),
            })?;
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// The distribution (or distributions, "a and b") whose files these are.
    pub fn dist(&self) -> &str {
        &self.dist
    }

    /// This backup and `other` as one: a step that replaces two distributions (a component and
    /// its former name) puts both back.
    pub fn join(mut self, other: Backup) -> Backup {
        self.dist = format!("{} and {}", self.dist, other.dist);
        self.files.extend(other.files);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// The path field of one RECORD line (CSV; a path with a comma is quoted).
fn record_path(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let path = if let Some(rest) = line.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    out.push('"');
                    chars.next();
                } else {
                    break;
                }
            } else {
                out.push(c);
            }
        }
        out
    } else {
        line.split(',').next()?.to_string()
    };
    (!path.is_empty()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_paths() {
        assert_eq!(record_path("a/b.py,sha256=x,12").as_deref(), Some("a/b.py"));
        assert_eq!(record_path("\"a,\"\"b\"\".py\",,").as_deref(), Some("a,\"b\".py"));
        assert_eq!(record_path("  "), None);
    }
}
