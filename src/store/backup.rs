//! Backups of installed distributions: a copy of every file a distribution's `RECORD` lists,
//! taken before a step replaces it and named in the install journal, so that the step, or a later
//! kiln after a kill, can put it back.
//!
//! It ignores what the files are and which installer wrote them; the snapshot
//! (`snapshot.rs`) covers what a RECORD does not list.

use std::path::{Path, PathBuf};

use crate::process::CommandFailed;

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
    /// Copies every file the RECORD of the distribution `name` lists into `dir`; `info` is its
    /// dist-info directory and `location` the directory its RECORD paths are relative to.
    pub fn take(name: &str, info: Option<&str>, location: Option<&str>, dir: &Path) -> Result<Backup, BackupError> {
        let fail = |detail: String| BackupError::Backup {
            dist: name.to_string(),
            detail,
        };
        let (Some(info), Some(loc)) = (info, location) else {
            return Err(fail("its metadata directory is unknown".into()));
        };
        let record =
            std::fs::read_to_string(Path::new(info).join("RECORD")).map_err(|e| fail(format!("no RECORD: {e}")))?;
        std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        let mut files = Vec::new();
        for (i, rel) in super::record::paths(&record).into_iter().enumerate() {
            let orig = Path::new(loc).join(rel);
            if !orig.is_file() {
                continue;
            }
            let copy = dir.join(i.to_string());
            std::fs::copy(&orig, &copy).map_err(|e| fail(format!("{}: {e}", orig.display())))?;
            files.push((orig, copy));
        }
        Ok(Backup {
            dist: name.to_string(),
            files,
        })
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

#[cfg(test)]
mod tests {
    /// Every file the RECORD lists is copied (a quoted path with a comma included) and put back
    /// after it changed; a file listed but gone is skipped.
    #[test]
    fn a_backup_puts_back_every_file_its_record_lists() {
        let site = tempfile::tempdir().unwrap();
        let s = site.path();
        std::fs::create_dir_all(s.join("pkg")).unwrap();
        std::fs::create_dir_all(s.join("pkg-1.0.dist-info")).unwrap();
        std::fs::write(s.join("pkg/a,b.py"), "one").unwrap();
        std::fs::write(s.join("pkg/c.py"), "two").unwrap();
        std::fs::write(
            s.join("pkg-1.0.dist-info/RECORD"),
            "\"pkg/a,b.py\",sha256=x,3\npkg/c.py,sha256=y,3\npkg/gone.py,,\npkg-1.0.dist-info/RECORD,,\n",
        )
        .unwrap();
        let info = s.join("pkg-1.0.dist-info").display().to_string();
        let loc = s.display().to_string();
        let b = super::Backup::take("pkg", Some(&info), Some(&loc), &s.join("backup")).unwrap();
        assert_eq!(b.len(), 3);
        std::fs::write(s.join("pkg/a,b.py"), "changed").unwrap();
        std::fs::remove_file(s.join("pkg/c.py")).unwrap();
        b.restore().unwrap();
        assert_eq!(std::fs::read_to_string(s.join("pkg/a,b.py")).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(s.join("pkg/c.py")).unwrap(), "two");
        assert!(super::Backup::take("pkg", None, Some(&loc), &s.join("b2")).is_err());
    }
}
