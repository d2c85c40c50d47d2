//! Build requirements installed once per run for each set of them: builds that require the
//! same packages (16 C extensions that each need `setuptools>=68`) share one overlay, read by
//! each through `PYTHONPATH`, instead of 16 installs of the same thing at once (issue 24, item
//! 4: on the H200's 16 cores they took 1.45 s a build, against 0.35 s with 4). The first build
//! of a set installs it while the others of that set wait; a failed install is not shared, so
//! each build that needs the set tries it once more itself and fails with its own log.
//!
//! A build whose commands name `{overlay}` (it may write there) keeps a private one. The
//! shared overlays live under `<cache>/work/overlays-<pid>` (so that `kiln cache clean` knows
//! whose they are) and go when the run ends.
//!
//! It owns only where overlays are and which build installs one; installing is the
//! installer's ([`super::install::Installer::install_target`]). It deliberately ignores
//! sharing across runs (each run resolves its requirements afresh, as before) and a failed
//! build's overlay after the run (it goes with the others; the step's log names what was
//! installed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One set's overlay once installed, with the step that installed it.
type Slot = Arc<Mutex<Option<(PathBuf, String)>>>;

/// The run's shared overlays, by requirement set.
#[derive(Debug)]
pub struct Shared {
    dir: PathBuf,
    sets: Mutex<BTreeMap<String, Slot>>,
}

/// Which overlay a build uses.
#[derive(Debug, PartialEq, Eq)]
pub enum Overlay {
    /// One another build of this run installed: nothing to install.
    Installed { dir: PathBuf, by: String },
    /// This build installed it (and shares it from now on).
    Made(PathBuf),
}

impl Shared {
    /// Shared overlays for a run of kiln with `cache`.
    pub fn new(cache: &Path) -> Shared {
        Shared {
            dir: cache.join("work").join(format!("overlays-{}", std::process::id())),
            sets: Mutex::new(BTreeMap::new()),
        }
    }

    /// The overlay for `requires` as `installer` (its name and settings, in `how`) installs
    /// them: another build's when one has installed that set in this run, else one `install`
    /// makes now for `step` (the other builds of the set wait meanwhile). An error of `install`
    /// is returned as is, and the set stays unshared.
    pub fn get<E>(
        &self,
        requires: &[String],
        how: &str,
        step: &str,
        install: impl FnOnce(&Path) -> Result<(), E>,
    ) -> Result<Overlay, E> {
        let key = key(requires, how);
        let slot = {
            let mut sets = self.sets.lock().unwrap_or_else(|p| p.into_inner());
            sets.entry(key.clone()).or_default().clone()
        };
        let mut made = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((dir, by)) = made.as_ref() {
            return Ok(Overlay::Installed {
                dir: dir.clone(),
                by: by.clone(),
            });
        }
        let dir = self.dir.join(&key);
        let _ = std::fs::remove_dir_all(&dir);
        install(&dir)?;
        *made = Some((dir.clone(), step.to_string()));
        Ok(Overlay::Made(dir))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a command of `spec` names `{overlay}` (and so may write there).
pub fn named_by(spec: &crate::resolve::spec::BuildSpec) -> bool {
    use crate::resolve::spec::Piece;
    spec.prepare
        .iter()
        .flatten()
        .chain(&spec.wheel)
        .any(|a| a.0.iter().any(|p| matches!(p, Piece::Overlay)))
}

/// A requirement set's name: the requirements in order, with how they are installed.
fn key(requires: &[String], how: &str) -> String {
    let mut parts: Vec<&str> = requires.iter().map(String::as_str).collect();
    parts.sort_unstable();
    parts.dedup();
    parts.insert(0, how);
    crate::store::aot::hash(&parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_set_is_installed_once_and_a_failed_install_is_not_shared() {
        let cache = tempfile::tempdir().unwrap();
        let shared = Shared::new(cache.path());
        let reqs = vec!["setuptools>=68".to_string(), "wheel".to_string()];
        let installs = std::sync::atomic::AtomicUsize::new(0);
        let install = |dir: &Path| -> Result<(), String> {
            installs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
            std::fs::create_dir_all(dir.join("setuptools")).map_err(|e| e.to_string())
        };
        let got: Vec<Overlay> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let (shared, reqs, install) = (&shared, &reqs, &install);
                    s.spawn(move || shared.get(reqs, "uv pip", &format!("b{i}"), install).unwrap())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(installs.load(std::sync::atomic::Ordering::SeqCst), 1);
        let made: Vec<&PathBuf> = got
            .iter()
            .filter_map(|o| match o {
                Overlay::Made(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(made.len(), 1);
        assert!(made[0].join("setuptools").is_dir());
        // The same set in another order is the same overlay; another installer is another.
        let reordered = vec!["wheel".to_string(), "setuptools>=68".to_string()];
        let again = shared.get(&reordered, "uv pip", "c", |_| Err("not called".to_string()));
        assert!(
            matches!(again, Ok(Overlay::Installed { ref dir, .. }) if dir == made[0]),
            "{again:?}"
        );
        let other = shared.get(&reqs, "pip", "d", |_| Err("pip failed".to_string()));
        assert_eq!(other, Err("pip failed".to_string()));
        let retried = shared.get(&reqs, "pip", "e", |d| {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())
        });
        assert!(
            matches!(retried, Ok(Overlay::Made(_))),
            "a failed set is tried again: {retried:?}"
        );
        let root = made[0].parent().unwrap().to_path_buf();
        drop(shared);
        assert!(!root.exists(), "the run's overlays go with it");
    }
}
