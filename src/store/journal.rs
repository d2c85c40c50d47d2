//! The install journal: before kiln touches site-packages it writes down what it is about to
//! replace, where the backup of it is, and how to remove what it installs; the entry goes once
//! the step is verified and recorded, or once a failed step was put back. A kiln killed in
//! between (`kill -9`, a power cut, a second Ctrl-C) leaves the entry behind, and the next kiln
//! command of any kind finishes or rolls it back before it does anything else ([`recover`]):
//!
//! - `snapshotting` (the run's snapshot is being taken, nothing changed yet): the partial
//!   snapshot is removed, so that a kill while it is taken leaves no copy of site-packages behind;
//! - `installing` (install, verification or recording under way, or, in a run that is one
//!   transaction, any point before the whole run is verified): rolled back — what was
//!   installed is uninstalled (with the installer the step used; for steps installed together,
//!   each of them, last first), the backup copied back (each), and
//!   the environment put back as the run's snapshot has it ([`super::snapshot`]: the steps the
//!   run finished before, the dependencies it added or upgraded, what a killed installer left
//!   half-written or stashed), so the environment imports what it imported before; an
//!   unverified install never stays;
//! - `done` (verified and `kiln.json` recorded, the backup not yet removed): finished — the
//!   backup and the snapshot are removed.
//!
//! A journal kiln cannot read (cut short, not JSON, of another shape, another environment's,
//! not a regular file) stops every command ([`Unreadable`]), naming the file and what to do: a
//! journal skipped is an environment left half-changed and then called `ok`.
//!
//! Entries live in the cache, `journal/env-<key>.json` (the key of the environment's lock,
//! [`super::locks::env_lock`]), not beside the environment: the backup they point at is in the
//! cache already (the step's work directory), every kiln command knows its cache before it knows
//! which interpreter it will look at, so "any command recovers first" is one directory listing,
//! and an environment kiln may only read (a system Python that `doctor` inspects) gets no file.
//! An entry is written to a temporary name, synced and renamed, so a reader sees a whole entry or
//! none. Recovery takes the environment's lock without waiting and leaves an entry alone while a
//! live kiln holds it (that kiln is in the middle of the step).
//!
//! It deliberately ignores what the snapshot does not cover (files outside site-packages and
//! the scripts directory).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::backup::Backup;
use super::locks;
use super::snapshot::Snapshot;
use crate::process::{Cmd, group};

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The run's snapshot is being taken into `snapshot.dir`; the environment is unchanged.
    Snapshotting,
    /// site-packages may have changed; nothing is proven yet.
    Installing,
    /// Verified and recorded; only the backup is left to remove.
    Done,
}

/// One unfinished step on one environment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub python: PathBuf,
    pub component: String,
    pub dist: String,
    pub state: State,
    /// The files of what was installed before; `None`: nothing was.
    pub backup: Option<Backup>,
    pub backup_dir: PathBuf,
    /// The command that removes what the step installs (the step's installer).
    pub uninstall: Vec<String>,
    pub pid: u32,
    pub since: u64,
    /// The environment before the run (or, with `--keep-done`, before this step).
    #[serde(default)]
    pub snapshot: Option<Snapshot>,
    /// The components this run installed before this step: rolled back with it.
    #[serde(default)]
    pub earlier: Vec<String>,
    /// The components this step installs together (one installer call), each with its backup
    /// and the command that removes it, as a single step's fields have them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch: Vec<Part>,
}

/// One of the components a step installs together.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    pub component: String,
    pub dist: String,
    pub backup: Option<Backup>,
    pub backup_dir: PathBuf,
    pub uninstall: Vec<String>,
}

impl Part {
    pub fn new(component: &str, dist: &str, backup: Option<&Backup>, backup_dir: &Path, uninstall: &Cmd) -> Part {
        Part {
            component: component.to_string(),
            dist: dist.to_string(),
            backup: backup.cloned(),
            backup_dir: backup_dir.to_path_buf(),
            uninstall: argv(uninstall),
        }
    }
}

fn argv(cmd: &Cmd) -> Vec<String> {
    std::iter::once(cmd.program.clone())
        .chain(cmd.args.iter().cloned())
        .collect()
}

/// A journal entry kept while a step changes the environment. While it is open an interrupt
/// does not end kiln at once: the step puts the environment back first.
pub struct Open {
    path: PathBuf,
    entry: Entry,
    _hold: group::Hold,
}

fn file_of(cache: &Path, python: &Path) -> PathBuf {
    cache.join("journal").join(format!("{}.json", locks::env_key(python)))
}

fn write(path: &Path, entry: &Entry) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(entry).map_err(std::io::Error::other)?;
    crate::store::atomic::write(path, &bytes, crate::store::atomic::Sync::Durable)
}

impl Open {
    /// Writes the entry (state `snapshotting`, naming `snapshot_dir`) before the run's snapshot
    /// is taken there; [`Open::snapshot_taken`] then names the snapshot.
    pub fn snapshotting(cache: &Path, python: &Path, snapshot_dir: &Path) -> std::io::Result<Open> {
        let partial = Snapshot {
            dir: snapshot_dir.to_path_buf(),
            roots: Vec::new(),
        };
        let mut open = Open::begin(cache, python, Some(partial));
        open.entry.state = State::Snapshotting;
        write(&open.path, &open.entry)?;
        Ok(open)
    }

    /// The snapshot is whole; the entry says so when the first step is written down.
    pub fn snapshot_taken(&mut self, snapshot: Snapshot) {
        self.entry.snapshot = Some(snapshot);
    }

    /// The entry (state `installing`), written by the first step, before anything in the
    /// environment changes.
    pub fn begin(cache: &Path, python: &Path, snapshot: Option<Snapshot>) -> Open {
        let entry = Entry {
            python: python.to_path_buf(),
            component: String::new(),
            dist: String::new(),
            state: State::Installing,
            backup: None,
            backup_dir: PathBuf::new(),
            uninstall: Vec::new(),
            pid: std::process::id(),
            since: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            snapshot,
            earlier: Vec::new(),
            batch: Vec::new(),
        };
        Open {
            path: file_of(cache, python),
            entry,
            _hold: group::hold(),
        }
    }

    /// Writes down the step about to change the environment (state `installing`).
    pub fn step(
        &mut self,
        component: &str,
        dist: &str,
        backup: Option<&Backup>,
        backup_dir: &Path,
        uninstall: &Cmd,
    ) -> std::io::Result<()> {
        let e = &mut self.entry;
        e.component = component.to_string();
        e.dist = dist.to_string();
        e.state = State::Installing;
        e.batch.clear();
        e.backup = backup.cloned();
        e.backup_dir = backup_dir.to_path_buf();
        e.uninstall = argv(uninstall);
        write(&self.path, &self.entry)
    }

    /// Writes down a change of `component`'s files that no installer makes (kiln's own files,
    /// `install --aot`): nothing to uninstall and no backup; a rollback puts the snapshot back.
    pub fn files_only(&mut self, component: &str, dist: &str) -> std::io::Result<()> {
        let e = &mut self.entry;
        e.component = component.to_string();
        e.dist = dist.to_string();
        e.state = State::Installing;
        e.batch.clear();
        e.backup = None;
        e.backup_dir = PathBuf::new();
        e.uninstall.clear();
        write(&self.path, &self.entry)
    }

    /// Writes down the components about to be installed together (state `installing`), each
    /// with its backup and uninstall command. Only in a run with a snapshot.
    pub fn batch(&mut self, parts: Vec<Part>) -> std::io::Result<()> {
        if self.entry.snapshot.is_none() {
            return Err(std::io::Error::other(
                "components install together only under a snapshot",
            ));
        }
        let mut e = self.entry.clone();
        e.component.clear();
        e.dist.clear();
        e.state = State::Installing;
        e.backup = None;
        e.backup_dir = PathBuf::new();
        e.uninstall.clear();
        e.batch = parts;
        write(&self.path, &e)?;
        self.entry = e;
        Ok(())
    }

    /// The step is verified, and the run goes on as one transaction: until the run is done a
    /// kill rolls it back with the rest (its backup is gone; the snapshot covers it).
    pub fn step_proven(&mut self) -> std::io::Result<()> {
        // Changed only once written: a write that fails leaves the entry as it was.
        let mut e = self.entry.clone();
        match e.batch.is_empty() {
            true => e.earlier.push(std::mem::take(&mut e.component)),
            false => e.earlier.extend(e.batch.drain(..).map(|p| p.component)),
        }
        e.dist.clear();
        e.backup = None;
        e.uninstall.clear();
        write(&self.path, &e)?;
        self.entry = e;
        Ok(())
    }

    /// The step (or the whole run) is verified and recorded.
    pub fn done(&mut self) -> std::io::Result<()> {
        self.entry.state = State::Done;
        write(&self.path, &self.entry)
    }

    /// The components finished before the current step.
    pub fn earlier(&self) -> &[String] {
        &self.entry.earlier
    }

    /// A new snapshot (`--keep-done`: after each proven step).
    pub fn set_snapshot(&mut self, snapshot: Option<Snapshot>) {
        self.entry.snapshot = snapshot;
    }

    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.entry.snapshot.as_ref()
    }

    /// The step is over (proven, or put back): the entry goes.
    pub fn close(self) {
        let _ = std::fs::remove_file(&self.path);
        crate::crash_point::reached("journal closed");
    }
}

/// What [`recover`] did with an entry a killed kiln left.
#[derive(Debug)]
pub struct Recovered {
    pub entry: Entry,
    /// `Ok(files restored)` for a rollback (0 when nothing was installed before), `Ok` too for
    /// a finished step; the error of a rollback that failed (the entry stays for the next run).
    pub result: Result<usize, String>,
    pub log: PathBuf,
}

impl std::fmt::Display for Recovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = &self.entry;
        let what = if e.state == State::Snapshotting {
            "a run".to_string()
        } else if !e.batch.is_empty() {
            e.batch
                .iter()
                .map(|p| p.component.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        } else if e.component.is_empty() {
            e.earlier.join(", ")
        } else {
            e.component.clone()
        };
        write!(
            f,
            "kiln (pid {}) was stopped while installing {what} into {}; ",
            e.pid,
            e.python.display()
        )?;
        match (&self.result, e.state, &e.backup) {
            (Ok(_), State::Done, _) => return write!(f, "it had verified and recorded it: finished"),
            (Ok(_), State::Snapshotting, _) => {
                return write!(
                    f,
                    "it was copying the environment's files before changing anything: the environment is as it was, the partial copy was removed"
                );
            }
            (Ok(_), State::Installing, _) if !e.batch.is_empty() => write!(
                f,
                "rolled back: they were installed together and not yet verified, so they were removed"
            )?,
            (Ok(_), State::Installing, _) if e.component.is_empty() => write!(
                f,
                "rolled back: the run had not verified every step, so what it installed was removed"
            )?,
            (Ok(n), State::Installing, Some(b)) => write!(
                f,
                "rolled back: the unverified install was removed and the previous {} restored ({n} files)",
                // What the backup holds: the step's distribution, or what the step replaced
                // (a former name of the component) with it.
                if super::normalize(b.dist()) == super::normalize(&e.dist) {
                    &e.dist
                } else {
                    b.dist()
                }
            )?,
            (Ok(_), State::Installing, None) => write!(
                f,
                "rolled back: the unverified install of {} was removed (it was not installed before)",
                e.dist
            )?,
            (Err(why), ..) => {
                return write!(
                    f,
                    "ROLLBACK FAILED: {why}; see {} (it is tried again on the next run)",
                    self.log.display()
                );
            }
        }
        let named = !e.component.is_empty() || !e.batch.is_empty();
        if !e.earlier.is_empty() && named {
            write!(
                f,
                "; the same run's earlier steps ({}) were rolled back too",
                e.earlier.join(", ")
            )?;
        }
        if e.snapshot.is_some() {
            write!(f, "; the environment's files are as they were before that run")?;
        }
        Ok(())
    }
}

/// A journal kiln cannot read: every command stops on it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the install journal {} cannot be read ({why}): a kiln was stopped while changing an \
     environment, and kiln cannot tell what it changed. kiln stops here rather than guess. Check \
     that environment (its `pip list`, or `kiln doctor` once the file is moved away), reinstall \
     what is half there, then remove the file: rm {}",
    path.display(),
    path.display()
)]
pub struct Unreadable {
    pub path: PathBuf,
    pub why: String,
}

/// Reads the journal `path`; it must be one kiln wrote for the environment its name keys.
fn read_entry(path: &Path) -> Result<Entry, Unreadable> {
    let bad = |why: String| Unreadable {
        path: path.to_path_buf(),
        why,
    };
    let entry: Entry = crate::state::read_json(path, crate::state::CACHE_LIMIT, "")
        .map_err(|e| {
            bad(match e {
                crate::state::StateError::Shape { detail, .. } => format!("not a journal kiln writes: {detail}"),
                crate::state::StateError::NotAFile { kind, .. } => format!("it is {kind}, not a regular file"),
                other => other.to_string(),
            })
        })?
        .ok_or_else(|| bad("it went away while it was read".into()))?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    if stem.as_deref() != Some(locks::env_key(&entry.python).as_str()) {
        return Err(bad(format!(
            "it names the environment of {}, but its name is another environment's",
            entry.python.display()
        )));
    }
    Ok(entry)
}

/// Finishes or rolls back every entry in `cache` that no live kiln holds (see the module doc);
/// the first journal that cannot be read stops it.
pub fn recover(cache: &Path) -> Result<Vec<Recovered>, Unreadable> {
    let Ok(dir) = std::fs::read_dir(cache.join("journal")) else {
        return Ok(Vec::new());
    };
    // What a kiln killed while it wrote an entry left beside it.
    crate::store::atomic::sweep(&cache.join("journal"));
    let mut paths: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let entry = read_entry(&path)?;
        let Some(_lock) = locks::try_take(&locks::env_lock(cache, &entry.python)) else {
            continue; // a live kiln is in the middle of this step
        };
        let log = cache.join("logs").join(format!("recover-{}.log", super::stamp()));
        crate::crash_point::reached("recover");
        let result = match entry.state {
            // Only the partial snapshot is there; it goes below.
            State::Snapshotting | State::Done => Ok(0),
            State::Installing => roll_back(&entry, &log),
        };
        crate::crash_point::reached("recovered");
        if result.is_ok() {
            // The entry goes first: a kill while the copies below are removed must not leave an
            // entry whose snapshot is half gone (a rollback from it would delete files).
            let _ = std::fs::remove_file(&path);
            for dir in entry.backup_dirs() {
                let _ = std::fs::remove_dir_all(dir);
            }
            if let Some(s) = &entry.snapshot {
                s.discard();
            }
        }
        out.push(Recovered { entry, result, log });
    }
    Ok(out)
}

/// What the journals in `cache` still need, each with its journal: the backup directory and
/// the snapshot of an unfinished step (what the next kiln rolls back from). A journal that
/// cannot be read names nothing (every command stops on it first, see [`recover`]).
pub fn held(cache: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(cache.join("journal")).into_iter().flatten().flatten() {
        let Ok(entry) = read_entry(&e.path()) else { continue };
        for dir in entry.backup_dirs() {
            out.push((dir.to_path_buf(), e.path()));
        }
        if let Some(s) = &entry.snapshot {
            out.push((s.dir.clone(), e.path()));
        }
    }
    out
}

impl Entry {
    /// The backup directories the entry names: its step's, or each of its batch's.
    fn backup_dirs(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.backup_dir.as_path())
            .chain(self.batch.iter().map(|p| p.backup_dir.as_path()))
            .filter(|d| !d.as_os_str().is_empty())
    }
}

/// Removes what the step (or each component of its batch) installed, puts the backup back,
/// then the whole environment as the snapshot has it.
fn roll_back(entry: &Entry, log: &Path) -> Result<usize, String> {
    let own = (&entry.uninstall, &entry.backup);
    let parts = entry.batch.iter().rev().map(|p| (&p.uninstall, &p.backup));
    let mut files = 0;
    for (uninstall, backup) in std::iter::once(own).chain(parts) {
        if let Some((program, args)) = uninstall.split_first() {
            // What was installed may be half there: the backup below is what counts.
            let _ = Cmd::new(program.clone())
                .args(args.iter().cloned())
                .restoring()
                .run_logged(log);
        }
        if let Some(b) = backup {
            b.restore().map_err(|e| e.to_string())?;
            files += b.len();
        }
    }
    crate::crash_point::reached("backup restored");
    if let Some(s) = &entry.snapshot {
        s.restore()
            .map_err(|e| format!("cannot put back the snapshot {}: {e}", s.dir.display()))?;
    }
    Ok(files)
}
