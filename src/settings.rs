//! Settings: everything the command line decides, typed once. `cli` builds a [`Settings`] from
//! the parsed arguments (and the environment variables clap reads); the session and the
//! commands read it and never look at argument text again: archs are [`Arch`]es, time limits
//! are [`Duration`]s, the cache directory is resolved to an absolute path.
//!
//! It deliberately ignores what the settings are for (which command runs, what the recipes
//! say) and knows nothing of clap.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::arch::Arch;
use crate::compile_cache::Backend;

/// The lockfile's name when none is given.
pub const DEFAULT_LOCK_FILE: &str = "kiln.lock";

/// The bundle's name when none is given.
pub const DEFAULT_BUNDLE_FILE: &str = "kiln-bundle.tar";

/// What the user asked for, for every command.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--python`: the interpreter to inspect and install into (default: chosen by the probe).
    pub python: Option<PathBuf>,
    /// `--arch`, parsed: the target archs (`None`: the GPUs found).
    pub archs: Option<Vec<Arch>>,
    /// `--recipes`: a recipe directory instead of the embedded recipes.
    pub recipes: Option<PathBuf>,
    /// kiln's cache directory, absolute.
    pub cache_dir: PathBuf,
    /// `--jobs`: compile jobs per build (default: what CPUs and memory allow).
    pub jobs: Option<usize>,
    /// `--memory-limit`: the memory builds may use together, in bytes (default: what is
    /// available).
    pub memory_limit: Option<u64>,
    /// The time limit for each import the probe tries (and for each smoke test); at least 1 s.
    pub import_timeout: Duration,
    /// Probe again even if nothing changed.
    pub refresh: bool,
    /// Installed components kiln may replace.
    pub allow_replace: Vec<String>,
    /// Use only what the caches hold.
    pub offline: bool,
    /// Consider the prebuilt wheels recipes offer (`--no-prebuilt`: build from source).
    pub prebuilt: bool,
    /// Print JSON on stdout.
    pub json: bool,
    /// Spinners and bars (off: plain progress lines).
    pub progress: bool,
    /// Print only errors.
    pub quiet: bool,
    /// `install`: prove the JIT of what it built or installed (off: `--no-jit-proof`).
    pub jit_proof: bool,
    /// `--no-wait`: fail at once when another kiln is changing the environment.
    pub no_wait: bool,
    /// `install --keep-done`: a step proven stays when a later one fails (else the run is one
    /// transaction).
    pub keep_done: bool,
    /// `--stall`: kill a build step that writes nothing and uses no CPU for this long (over the
    /// recipe's `[build] stall`).
    pub stall: Option<Duration>,
    /// `--limit`: kill a build step that runs longer than this (over the recipe's
    /// `[build] limit`).
    pub limit: Option<Duration>,
    /// `--compile-cache` (`KILN_COMPILE_CACHE`): builds compile through sccache with this backend.
    pub compile_cache: Option<Backend>,
    /// `--need` (`KILN_NEED`): backends the user needs, as written (`--quantization=fp_quant`,
    /// `fp_quant`); the session checks them against the recipes.
    pub needs: Vec<String>,
    /// Where long work (the probe, proofs, AOT compiles, the plan's wheel downloads and reads)
    /// reports that it started, how far it is and that it finished; the command layer sets it
    /// (`report::watcher::watcher`), and by default nobody watches.
    pub watch: crate::watch::Watch,
}

impl Settings {
    /// Settings with every default: no flags given, the cache directory resolved as
    /// [`cache_dir`] does.
    pub fn new() -> Settings {
        Settings {
            python: None,
            archs: None,
            recipes: None,
            cache_dir: cache_dir(None),
            jobs: None,
            memory_limit: None,
            import_timeout: import_timeout(120),
            refresh: false,
            allow_replace: Vec::new(),
            offline: false,
            prebuilt: true,
            json: false,
            progress: true,
            quiet: false,
            jit_proof: true,
            no_wait: false,
            keep_done: false,
            stall: None,
            limit: None,
            compile_cache: None,
            needs: Vec::new(),
            watch: crate::watch::Watch::default(),
        }
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings::new()
    }
}

/// The per-import time limit for `secs` seconds (0 counts as 1: a limit of nothing would fail
/// every import).
pub fn import_timeout(secs: u64) -> Duration {
    Duration::from_secs(secs.max(1))
}

/// The cache directory: `given` (`--cache-dir` or `KILN_CACHE_DIR`), else
/// `$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`. Always absolute: builds run in other
/// directories.
pub fn cache_dir(given: Option<&Path>) -> PathBuf {
    let dir = cache_dir_as_given(given);
    std::path::absolute(&dir).unwrap_or(dir)
}

fn cache_dir_as_given(given: Option<&Path>) -> PathBuf {
    if let Some(d) = given {
        return d.to_path_buf();
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("kiln");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache").join("kiln"),
        None => std::env::temp_dir().join("kiln-cache"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_cache_dir_wins_and_comes_back_absolute() {
        let d = cache_dir(Some(Path::new("rel/cache")));
        assert!(d.is_absolute());
        assert!(d.ends_with("rel/cache"));
        assert!(cache_dir(None).is_absolute());
    }

    #[test]
    fn an_import_time_limit_is_at_least_a_second() {
        assert_eq!(import_timeout(0), Duration::from_secs(1));
        assert_eq!(import_timeout(120), Duration::from_secs(120));
    }
}
