//! Files kiln adds to an installed distribution: the run-time environment file
//! (`probe::runtime`) and modules compiled ahead of time (`install --aot`). Each one is listed
//! in the distribution's `RECORD`, so that uninstalling or replacing the distribution (pip, uv
//! or kiln) removes it with the rest, and a backup of the distribution (`store::backup::Backup`)
//! carries it. [`Added`] remembers what a change replaced, so a failed step can undo it.
//!
//! It deliberately ignores what the files mean and when they are added (the install
//! transaction and `session::aot` decide).

use std::path::{Path, PathBuf};

use crate::probe::normalize;

/// What one file gets.
pub enum Content<'a> {
    Text(&'a str),
    /// A copy of this file.
    Copy(&'a Path),
}

/// What [`add`] changed: RECORD's previous text and each file with its previous bytes.
#[derive(Debug)]
pub struct Added {
    record: PathBuf,
    before: String,
    files: Vec<(PathBuf, Option<Vec<u8>>)>,
}

impl Added {
    /// Puts RECORD and every file back as they were (a file that did not exist is removed).
    pub fn undo(&self) {
        for (path, old) in self.files.iter().rev() {
            let _ = match old {
                Some(bytes) => replace_file(path, bytes),
                None => std::fs::remove_file(path),
            };
        }
        let _ = replace_file(&self.record, self.before.as_bytes());
    }

    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }
}

/// The `.dist-info` directory of `dist` in the site-packages directory `site`.
pub fn dist_info(site: &Path, dist: &str) -> Option<PathBuf> {
    let want = normalize(dist);
    let mut found: Vec<PathBuf> = std::fs::read_dir(site)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            name.strip_suffix(".dist-info")
                .and_then(|stem| stem.split('-').next())
                .is_some_and(|n| normalize(n) == want)
        })
        .collect();
    found.sort();
    found.pop()
}

/// Writes each `(path relative to site, content)` into `site` and lists it in `info`'s RECORD.
/// On an error, what was already done is undone.
pub fn add(site: &Path, info: &Path, files: &[(String, Content<'_>)]) -> std::io::Result<Added> {
    let record = info.join("RECORD");
    let before = std::fs::read_to_string(&record)?;
    let mut added = Added {
        record,
        before: before.clone(),
        files: Vec::new(),
    };
    let mut text = before;
    for (rel, content) in files {
        let path = site.join(rel);
        let old = std::fs::read(&path).ok();
        added.files.push((path.clone(), old));
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| match content {
                Content::Text(t) => replace_file(&path, t.as_bytes()),
                Content::Copy(from) => write_copy(from, &path),
            });
        if let Err(e) = written {
            added.undo();
            return Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())));
        }
        if let Some(t) = listed_with(&text, rel) {
            text = t;
        }
    }
    if let Err(e) = replace_file(&added.record, text.as_bytes()) {
        added.undo();
        return Err(e);
    }
    Ok(added)
}

/// Writes `path` anew through a temporary name and a rename, never into the file that is
/// there: a reader never sees half a file, and a snapshot's link to the old file
/// (`crate::store::snapshot`) keeps the old bytes.
pub(super) fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::store::atomic::write(path, bytes, crate::store::atomic::Sync::Durable)
}

/// Copies through a temporary file of its own, so a reader never sees half a file and two
/// writers never share one.
fn write_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    crate::store::atomic::copy(from, to)
}

/// `record` with a line for `path` added; `None` when it lists it already.
pub(super) fn listed_with(record: &str, path: &str) -> Option<String> {
    let line = format!("{path},,");
    if record.lines().any(|l| l == line) {
        return None;
    }
    let sep = if record.ends_with('\n') || record.is_empty() {
        ""
    } else {
        "\n"
    };
    Some(format!("{record}{sep}{line}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_files_are_listed_once_and_undo_puts_everything_back() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path();
        let info = site.join("Demo_Pkg-1.0.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(info.join("RECORD"), "demo/x.py,,\n").unwrap();
        std::fs::write(site.join("kiln-demo-env.pth"), "old\n").unwrap();
        assert_eq!(dist_info(site, "demo-pkg"), Some(info.clone()));
        assert_eq!(dist_info(site, "other"), None);

        let so = dir.path().join("m.so");
        std::fs::write(&so, "elf").unwrap();
        let files = [
            ("kiln-demo-env.pth".to_string(), Content::Text("new\n")),
            ("demo/data/aot/m/m.so".to_string(), Content::Copy(&so)),
        ];
        let added = add(site, &info, &files).unwrap();
        let record = std::fs::read_to_string(info.join("RECORD")).unwrap();
        assert_eq!(record, "demo/x.py,,\nkiln-demo-env.pth,,\ndemo/data/aot/m/m.so,,\n");
        assert_eq!(
            std::fs::read_to_string(site.join("demo/data/aot/m/m.so")).unwrap(),
            "elf"
        );
        // Adding the same files again lists nothing twice.
        add(site, &info, &files).unwrap();
        assert_eq!(std::fs::read_to_string(info.join("RECORD")).unwrap(), record);

        added.undo();
        assert_eq!(std::fs::read_to_string(info.join("RECORD")).unwrap(), "demo/x.py,,\n");
        assert_eq!(
            std::fs::read_to_string(site.join("kiln-demo-env.pth")).unwrap(),
            "old\n"
        );
        assert!(!site.join("demo/data/aot/m/m.so").exists());
    }

    #[test]
    fn a_file_that_cannot_be_written_undoes_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path();
        let info = site.join("demo-1.0.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(info.join("RECORD"), "").unwrap();
        let files = [
            ("kiln-demo-env.pth".to_string(), Content::Text("x\n")),
            ("m.so".to_string(), Content::Copy(Path::new("/nonexistent/m.so"))),
        ];
        let e = add(site, &info, &files).unwrap_err();
        assert!(e.to_string().contains("m.so"), "{e}");
        assert!(!site.join("kiln-demo-env.pth").exists());
        assert_eq!(std::fs::read_to_string(info.join("RECORD")).unwrap(), "");
    }
}
