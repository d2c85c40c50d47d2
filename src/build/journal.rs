//! The install journal: before kiln touches site-packages it writes down what it is about to
//! replace, where the backup of it is, and how to remove what it installs; the entry goes once
//! the step is verified and recorded, or once a failed step was put back. A kiln killed in
//! between (`kill -9`, a power cut, a second Ctrl-C) leaves the entry behind, and the next kiln
//! command of any kind finishes or rolls it back before it does anything else ([`recover`]):
//!
//! - `installing` (install, verification or recording under way): rolled back — what was
//!   installed is uninstalled (with the installer the step used) and the backup copied back,
//!   so the environment imports what it imported before; an unverified install never stays;
//! - `done` (verified and `kiln.json` recorded, the backup not yet removed): finished — the
//!   backup is removed.
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
//! It deliberately ignores runtime dependencies an install added (`[install] deps = true`): a
//! rollback removes the component, as a failed step does, not what came with it.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::install::Backup;
use super::locks;
use crate::process::{Cmd, group};

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
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
}

/// A journal entry kept while a step changes the environment. While it is open an interrupt
/// does not end kiln at once: the step puts the environment back first.
pub struct Open {
    path: PathBuf,
    entry: Entry,
    _hold: group::Hold,
}

fn file_of(cache: &Path, python: &Path) -> PathBuf {
    let lock = locks::env_lock(cache, python);
    let name = lock
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    cache.join("journal").join(format!("{name}.json"))
}

fn write(path: &Path, entry: &Entry) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&serde_json::to_vec_pretty(entry).map_err(std::io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

impl Open {
    /// Writes the entry (state `installing`) before anything in the environment changes.
    pub fn begin(
        cache: &Path,
        python: &Path,
        component: &str,
        dist: &str,
        backup: Option<&Backup>,
        backup_dir: &Path,
        uninstall: &Cmd,
    ) -> std::io::Result<Open> {
        let hold = group::hold();
        let entry = Entry {
            python: python.to_path_buf(),
            component: component.to_string(),
            dist: dist.to_string(),
            state: State::Installing,
            backup: backup.cloned(),
            backup_dir: backup_dir.to_path_buf(),
            uninstall: std::iter::once(uninstall.program.clone())
                .chain(uninstall.args.iter().cloned())
                .collect(),
            pid: std::process::id(),
            since: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let path = file_of(cache, python);
        write(&path, &entry)?;
        Ok(Open {
            path,
            entry,
            _hold: hold,
        })
    }

    /// The step is verified and recorded.
    pub fn done(&mut self) -> std::io::Result<()> {
        self.entry.state = State::Done;
        write(&self.path, &self.entry)
    }

    /// The step is over (proven, or put back): the entry goes.
    pub fn close(self) {
        let _ = std::fs::remove_file(&self.path);
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
        write!(
            f,
            "kiln (pid {}) was stopped while installing {} into {}; ",
            e.pid,
            e.component,
            e.python.display()
        )?;
        match (&self.result, e.state, &e.backup) {
            (Ok(_), State::Done, _) => write!(f, "it had verified and recorded it: finished"),
            (Ok(n), State::Installing, Some(b)) => write!(
                f,
                "rolled back: the unverified install was removed and the previous {} restored ({n} files)",
                // What the backup holds: the step's distribution, or what the step replaced
                // (a former name of the component) with it.
                if crate::probe::normalize(b.dist()) == crate::probe::normalize(&e.dist) {
                    &e.dist
                } else {
                    b.dist()
                }
            ),
            (Ok(_), State::Installing, None) => write!(
                f,
                "rolled back: the unverified install of {} was removed (it was not installed before)",
                e.dist
            ),
            (Err(why), ..) => write!(
                f,
                "ROLLBACK FAILED: {why}; see {} (it is tried again on the next run)",
                self.log.display()
            ),
        }
    }
}

/// Finishes or rolls back every entry in `cache` that no live kiln holds (see the module doc).
pub fn recover(cache: &Path) -> Vec<Recovered> {
    let Ok(dir) = std::fs::read_dir(cache.join("journal")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for path in dir.flatten().map(|e| e.path()) {
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(entry) = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_slice::<Entry>(&t).map_err(|e| e.to_string()))
        else {
            continue;
        };
        let Some(_lock) = locks::try_take(&locks::env_lock(cache, &entry.python)) else {
            continue; // a live kiln is in the middle of this step
        };
        let log = cache.join("logs").join(format!("recover-{}.log", super::run_stamp()));
        let result = match entry.state {
            State::Done => Ok(0),
            State::Installing => roll_back(&entry, &log),
        };
        if result.is_ok() {
            let _ = std::fs::remove_dir_all(&entry.backup_dir);
            let _ = std::fs::remove_file(&path);
        }
        out.push(Recovered { entry, result, log });
    }
    out
}

/// Removes what the step installed and puts the backup back.
fn roll_back(entry: &Entry, log: &Path) -> Result<usize, String> {
    if let Some((program, args)) = entry.uninstall.split_first() {
        // What was installed may be half there: the backup below is what counts.
        let _ = Cmd::new(program.clone())
            .args(args.iter().cloned())
            .restoring()
            .run_logged(log);
    }
    match &entry.backup {
        None => Ok(0),
        Some(b) => b.restore().map(|()| b.len()).map_err(|e| e.to_string()),
    }
}

/// A test hook: with `KILN_TEST_PAUSE_AT=<point>:<file>` kiln writes `<file>` when it reaches
/// `<point>` and sleeps, so that a test can kill it there with `kill -9`. Used only where no
/// subprocess runs that a test could block instead (between writing `kiln.json` and finishing).
pub(super) fn test_pause(point: &str) {
    let Ok(v) = std::env::var("KILN_TEST_PAUSE_AT") else {
        return;
    };
    let Some((at, file)) = v.split_once(':') else { return };
    if at == point {
        let _ = std::fs::write(file, std::process::id().to_string());
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
}
