//! One run, one transaction: before the run first changes the environment it takes a snapshot
//! of it (`crate::store::snapshot`) and opens the install journal (`crate::store::journal`); each step
//! (or each batch of steps installed together) writes itself into the journal before it
//! installs. When a step fails, or the run is
//! interrupted, the environment is put back as the snapshot has it: the steps the run proved
//! before are rolled back too, with every dependency the run added or upgraded and whatever a
//! killed installer left behind, and [`Undo`] says what that was. With `--keep-done` each proven
//! step is final instead: the journal closes after it and the next step gets a snapshot of its
//! own, so a failure puts back only the step that failed (and says that the others stay).
//!
//! It deliberately ignores how a step installs and proves itself (`commit`, `batch`) and what
//! order the steps run in (`queue`).

use serde::Serialize;

use super::Context;
use crate::process::Cmd;
use crate::store::backup::Backup;
use crate::store::journal::{Open, Part};
use crate::store::locks;
use crate::store::snapshot::{self, Snapshot};

/// A distribution the rollback put back to what it was before (`None`: it was not there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DistChange {
    pub name: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// What became of the environment after a failed step, for the run as a whole.
#[derive(Debug, Clone, Serialize)]
pub struct Undo {
    /// With `--keep-done`: only the failed step was put back; the proven ones stay.
    pub kept: Vec<String>,
    /// Steps this run had installed and verified that were rolled back with the failed one.
    pub rolled_back: Vec<String>,
    /// Distributions put back as they were before (the failed step's own included).
    pub dists: Vec<DistChange>,
    pub restored: snapshot::Restored,
    /// The snapshot could not be put back (the journal stays for the next run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl std::fmt::Display for Undo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(e) = &self.error {
            return write!(f, "ROLLBACK FAILED: {e}; the next kiln command tries again");
        }
        if !self.rolled_back.is_empty() {
            write!(
                f,
                "the run is one transaction: {} (installed and verified earlier in this run) rolled back too; ",
                self.rolled_back.join(", ")
            )?;
        }
        if !self.kept.is_empty() {
            write!(
                f,
                "{} stay installed and verified (--keep-done); ",
                self.kept.join(", ")
            )?;
        }
        let dists: Vec<String> = self
            .dists
            .iter()
            .map(|d| match (&d.after, &d.before) {
                (Some(a), Some(b)) => format!("{} {a} -> {b}", d.name),
                (Some(a), None) => format!("{} {a} removed", d.name),
                (None, Some(b)) => format!("{} {b} restored", d.name),
                (None, None) => d.name.clone(),
            })
            .collect();
        let when = if self.kept.is_empty() {
            "the run"
        } else {
            "the failed step"
        };
        write!(f, "every file is as it was before {when}")?;
        if !dists.is_empty() {
            write!(f, " ({})", dists.join(", "))?;
        }
        Ok(())
    }
}

pub(super) struct Txn<'a> {
    cx: &'a Context<'a>,
    journal: Option<Open>,
    /// Steps proven so far (with `--keep-done`, since the last snapshot none are pending).
    proven: Vec<String>,
    pub undo: Option<Undo>,
    /// A step of this transaction failed.
    failed: bool,
}

impl<'a> Txn<'a> {
    pub fn new(cx: &'a Context<'a>) -> Txn<'a> {
        Txn {
            cx,
            journal: None,
            proven: Vec::new(),
            undo: None,
            failed: false,
        }
    }

    /// Writes the step into the journal before it changes the environment; the first step of
    /// the transaction takes the snapshot first.
    pub fn begin_step(
        &mut self,
        component: &str,
        dist: &str,
        backup: Option<&Backup>,
        backup_dir: &std::path::Path,
        uninstall: &Cmd,
    ) -> std::io::Result<()> {
        self.open()?.step(component, dist, backup, backup_dir, uninstall)
    }

    /// Writes the components about to be installed together into the journal (only in a run
    /// that is one transaction: its snapshot undoes them).
    pub fn begin_batch(&mut self, parts: Vec<Part>) -> std::io::Result<()> {
        if self.cx.keep_done {
            return Err(std::io::Error::other("with --keep-done every step installs on its own"));
        }
        self.open()?.batch(parts)
    }

    /// The journal, opened by the first step of the transaction, which takes the snapshot first.
    fn open(&mut self) -> std::io::Result<&mut Open> {
        if self.journal.is_none() {
            // Written down first, so that a kill while the copy is made removes it.
            let lock = locks::env_lock(&self.cx.cache, &self.cx.python);
            let dir = snapshot::dir_for(&lock, &self.cx.cache, &super::run_stamp());
            let mut j = Open::snapshotting(&self.cx.cache, &self.cx.python, &dir)?;
            match self.snapshot(&dir) {
                Ok(snap) => j.snapshot_taken(snap),
                Err(e) => {
                    if let Some(s) = j.snapshot() {
                        s.discard();
                    }
                    j.close();
                    return Err(e);
                }
            }
            crate::crash_point::reached("snapshot taken");
            self.journal = Some(j);
        }
        Ok(self.journal.as_mut().expect("opened above"))
    }

    fn snapshot(&self, dir: &std::path::Path) -> std::io::Result<Snapshot> {
        let paths = &self.cx.facts.python.paths;
        let roots: Vec<std::path::PathBuf> = ["purelib", "platlib", "scripts"]
            .iter()
            .filter_map(|k| paths.get(*k).cloned().flatten())
            .map(std::path::PathBuf::from)
            .collect();
        Snapshot::take(&roots, dir)
    }

    /// The step (or the components installed together) is verified and recorded.
    pub fn step_proven(&mut self, components: &[&str]) -> std::io::Result<()> {
        let Some(j) = self.journal.as_mut() else {
            return Ok(());
        };
        self.proven.extend(components.iter().map(|c| c.to_string()));
        if !self.cx.keep_done {
            return j.step_proven();
        }
        j.done()?;
        self.close(true);
        Ok(())
    }

    fn close(&mut self, discard: bool) {
        if let Some(j) = self.journal.take() {
            // The entry goes before its snapshot (see `store::journal::recover`).
            let snapshot = j.snapshot().cloned().filter(|_| discard);
            j.close();
            if let Some(s) = snapshot {
                s.discard();
            }
        }
    }

    /// A step failed (its own install already put back by `commit`): the environment goes back
    /// to the snapshot now, and no later step may install in this transaction.
    pub fn failed(&mut self) {
        self.failed = true;
        let Some(j) = &self.journal else {
            // Nothing of this transaction is installed; with `--keep-done` the proven steps stay.
            if self.cx.keep_done && !self.proven.is_empty() {
                self.undo = Some(Undo {
                    kept: std::mem::take(&mut self.proven),
                    rolled_back: Vec::new(),
                    dists: Vec::new(),
                    restored: snapshot::Restored::default(),
                    error: None,
                });
            }
            return;
        };
        let Some(snap) = j.snapshot().cloned() else { return };
        let before = snap.dists();
        let now = snap.dists_now();
        let mut dists: Vec<DistChange> = before
            .keys()
            .chain(now.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .filter(|n| before.get(*n) != now.get(*n))
            .map(|n| DistChange {
                name: n.clone(),
                before: before.get(n).cloned(),
                after: now.get(n).cloned(),
            })
            .collect();
        dists.sort_by(|a, b| a.name.cmp(&b.name));
        let result = snap.restore();
        let (kept, rolled_back) = if self.cx.keep_done {
            (std::mem::take(&mut self.proven), Vec::new())
        } else {
            (Vec::new(), j.earlier().to_vec())
        };
        self.undo = Some(Undo {
            kept,
            rolled_back,
            dists,
            restored: result.as_ref().copied().unwrap_or_default(),
            error: result.as_ref().err().map(|e| e.to_string()),
        });
        if result.is_ok() {
            self.close(true);
        } else {
            // The journal (and the snapshot it names) stays: the next kiln tries again.
            self.journal = None;
        }
    }

    /// Every step is proven: the run is done, its snapshot goes.
    pub fn finish(mut self) -> Option<Undo> {
        if let Some(j) = self.journal.as_mut() {
            let _ = j.done();
        }
        crate::crash_point::reached("run done");
        self.close(true);
        self.undo
    }

    /// Whether a step may still install: not after a failure of this transaction.
    pub fn open_for_more(&self) -> bool {
        !self.failed || self.cx.keep_done
    }
}
