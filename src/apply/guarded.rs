//! Files kiln writes into an environment outside a build step (`install --aot`: precompiled
//! modules, their record, the run-time file) go in under the install journal, as a step's do:
//! site-packages is snapshotted (hard links, `crate::store::snapshot`) and the journal written before
//! the first file changes, so a kiln killed while it checks them is rolled back by the next
//! kiln command (`store::journal::recover`), leaving the environment as it was before. The
//! change is kept with [`Guarded::keep`]; dropping it unkept (a failed check, after the caller
//! took its files out again) removes the journal entry and the snapshot too.
//!
//! It deliberately ignores what the files are and the environment's lock: the caller holds it
//! (`kiln install` does for the whole command).

use std::path::Path;

use super::run_stamp;
use crate::store::journal::Open;
use crate::store::locks;
use crate::store::snapshot::{self, Snapshot};

/// A change of an environment's files under the journal, until kept or dropped.
pub struct Guarded {
    journal: Option<Open>,
    snapshot: Snapshot,
}

/// Snapshots `site` and writes the journal entry of `component` (distribution `dist`) of the
/// environment of `python`, before anything in `site` changes.
pub fn begin(cache: &Path, python: &Path, site: &Path, component: &str, dist: &str) -> std::io::Result<Guarded> {
    let lock = locks::env_lock(cache, python);
    let dir = snapshot::dir_for(&lock, cache, &run_stamp());
    // Written down first, so that a kill while the copy is made removes it.
    let mut journal = Open::snapshotting(cache, python, &dir)?;
    let taken = Snapshot::take(&[site.to_path_buf()], &dir);
    let snap = match taken {
        Ok(snap) => snap,
        Err(e) => {
            if let Some(s) = journal.snapshot() {
                s.discard();
            }
            journal.close();
            return Err(e);
        }
    };
    journal.snapshot_taken(snap.clone());
    if let Err(e) = journal.files_only(component, dist) {
        snap.discard();
        journal.close();
        return Err(e);
    }
    Ok(Guarded {
        journal: Some(journal),
        snapshot: snap,
    })
}

impl Guarded {
    /// The files are in and checked: the journal entry and the snapshot go.
    pub fn keep(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if let Some(j) = self.journal.take() {
            j.close();
        }
        self.snapshot.discard();
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_added_under_the_journal_are_rolled_back_after_a_kill() {
        let t = tempfile::tempdir().unwrap();
        let (cache, site) = (t.path().join("cache"), t.path().join("venv/lib/site-packages"));
        let python = t.path().join("venv/bin/python");
        std::fs::create_dir_all(python.parent().unwrap()).unwrap();
        std::fs::create_dir_all(site.join("pkg-1.0.dist-info")).unwrap();
        std::fs::write(site.join("pkg-1.0.dist-info/RECORD"), "pkg/__init__.py,,\n").unwrap();
        let guarded = begin(&cache, &python, &site, "pkg", "pkg").unwrap();
        // As `install --aot` adds them: each file and RECORD written anew (renamed into place).
        let files = [(
            "pkg/data/aot/m.so".to_string(),
            super::super::owned::Content::Text("module"),
        )];
        super::super::owned::add(&site, &site.join("pkg-1.0.dist-info"), &files).unwrap();
        assert!(site.join("pkg/data/aot/m.so").is_file());
        // kiln is killed here: nothing ends the change; the next kiln finds the journal.
        std::mem::forget(guarded);
        let recovered = crate::store::journal::recover(&cache).unwrap();
        assert_eq!(recovered.len(), 1);
        assert!(recovered[0].result.is_ok(), "{}", recovered[0]);
        assert!(!site.join("pkg/data/aot/m.so").exists());
        assert_eq!(
            std::fs::read_to_string(site.join("pkg-1.0.dist-info/RECORD")).unwrap(),
            "pkg/__init__.py,,\n"
        );
        assert!(crate::store::journal::recover(&cache).unwrap().is_empty());

        // Kept: no journal, no snapshot left.
        let guarded = begin(&cache, &python, &site, "pkg", "pkg").unwrap();
        super::super::owned::add(&site, &site.join("pkg-1.0.dist-info"), &files).unwrap();
        guarded.keep();
        assert!(crate::store::journal::recover(&cache).unwrap().is_empty());
        assert!(site.join("pkg/data/aot/m.so").exists());
    }
}
