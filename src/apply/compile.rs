//! The compile cache during a run (`--compile-cache`): what each build step's compilers go
//! through, and what happens when that cannot be trusted. A build never fails because of it.
//!
//! - Once per run, at the first build that uses it: sccache is found or brought
//!   ([`compile_cache::tool`]), and when the plan's builds use nvcc, a probe compile for the
//!   target archs says whether this sccache can wrap this nvcc ([`compile_cache::probe`]); if
//!   not, nvcc runs uncached (C and C++ stay cached) and the run says why, once.
//! - For each build step: the backend must answer a check first (Redis `PING` within 2 s), else
//!   the step builds without the cache; a server of its own is started
//!   ([`compile_cache::server`]), and a watchdog checks the backend every second while the step
//!   builds. When the backend stops answering, the watchdog swaps the server for one on a local
//!   directory (sccache 0.16 would wait 30 s on every read and write), and the step goes on.
//!   When the step ends, the server's statistics become the step's record (outcome, event
//!   log, timings, summary).
//! - Each kind of trouble (no sccache, sccache cannot wrap nvcc, backend down) is one warning
//!   per run, however many steps it touches.
//!
//! It deliberately ignores what a build runs (the spec's environment carries the wiring) and
//! where it builds ([`compile_cache::StableDir`] is taken by `step`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::Reporter;
use crate::arch::Arch;
use crate::compile_cache::server::Server;
use crate::compile_cache::stats::Stats;
use crate::compile_cache::{self, Backend, probe, tool};
use crate::resolve::Step;

/// How often the watchdog asks the backend, and how long it waits for an answer.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// The compile cache of one run.
pub struct CompileCache {
    backend: Backend,
    cache: PathBuf,
    offline: bool,
    archs: Vec<Arch>,
    watch: crate::watch::Watch,
    ready: OnceLock<Result<Ready, String>>,
    warned: Mutex<BTreeSet<&'static str>>,
}

/// What the first build found out.
struct Ready {
    sccache: PathBuf,
    /// `Err`: why nvcc cannot go through this sccache.
    cuda: Result<(), String>,
}

/// What the first server of a step saw before the backend stopped answering, and why.
type FellBack = (Stats, String);

/// The compile cache around one step's build.
pub struct StepCache {
    /// The socket and whether nvcc goes through it (for the spec's environment).
    pub run: Option<(String, bool)>,
    server: Option<Arc<Mutex<Server>>>,
    watch: Option<(Arc<AtomicBool>, std::thread::JoinHandle<Option<FellBack>>)>,
    uncached: Option<String>,
    shown: String,
}

impl CompileCache {
    /// `watch` sees sccache's download, where kiln brings it.
    pub fn new(
        backend: Backend,
        cache: &Path,
        offline: bool,
        archs: &[Arch],
        watch: &crate::watch::Watch,
    ) -> CompileCache {
        CompileCache {
            backend,
            cache: cache.to_path_buf(),
            offline,
            archs: archs.to_vec(),
            watch: watch.clone(),
            ready: OnceLock::new(),
            warned: Mutex::new(BTreeSet::new()),
        }
    }

    /// The backend as it may be shown.
    pub fn shown(&self) -> String {
        self.backend.shown()
    }

    /// Says `text` about `step` unless a warning of this `kind` was given in this run.
    fn warn(&self, kind: &'static str, reporter: &dyn Reporter, step: &Step, text: &str) {
        let first = self.warned.lock().map(|mut w| w.insert(kind)).unwrap_or(true);
        if first {
            reporter.warning(step, text);
        }
    }

    fn ready(&self, nvcc: Option<&str>, logs: &Path) -> &Result<Ready, String> {
        self.ready.get_or_init(|| {
            let sccache = tool::ensure(&self.cache, self.offline, &self.watch)?;
            compile_cache::launcher::ensure(&self.cache)?;
            let cuda = match nvcc {
                Some(nvcc) if !self.archs.is_empty() => {
                    let dir = logs.join("sccache-probe");
                    probe::cuda(&sccache, nvcc, &self.archs, &dir).map_err(|why| {
                        let v = tool::version(&sccache).unwrap_or_else(|_| "?".into());
                        format!("sccache {v} cannot wrap {nvcc}: {why}")
                    })
                }
                _ => Ok(()),
            };
            Ok(Ready { sccache, cuda })
        })
    }

    /// Starts the compile cache for `step` (its logs beside `log`); a step that cannot use it
    /// builds without it, with a warning.
    pub fn begin(&self, step: &Step, nvcc: Option<&str>, log: &Path, reporter: &dyn Reporter) -> StepCache {
        let shown = self.backend.shown();
        let off = |why: String| StepCache {
            run: None,
            server: None,
            watch: None,
            uncached: Some(why),
            shown: shown.clone(),
        };
        let logs = log.parent().unwrap_or(Path::new("."));
        let ready = match self.ready(nvcc, logs) {
            Ok(r) => r,
            Err(why) => {
                let text = format!("the compile cache is off for this run: {why}");
                self.warn("tool", reporter, step, &text);
                return off(why.clone());
            }
        };
        if let Err(why) = &ready.cuda {
            let text = format!("{why}; CUDA compiles run without the compile cache in this run");
            self.warn("cuda", reporter, step, &text);
        }
        if let Err(why) = self.backend.check(compile_cache::CHECK_LIMIT) {
            let why = format!("the compile cache {shown} does not answer ({why})");
            self.warn("backend", reporter, step, &format!("{why}; building without it"));
            return off(why);
        }
        let server = match Server::start(&ready.sccache, &self.backend, log) {
            Ok(s) => s,
            Err(why) => {
                self.warn(
                    "backend",
                    reporter,
                    step,
                    &format!("{why}; building without the compile cache"),
                );
                return off(why);
            }
        };
        let socket = server.socket().display().to_string();
        let server = Arc::new(Mutex::new(server));
        let stop = Arc::new(AtomicBool::new(false));
        let local = log.with_extension("sccache-local");
        let thread = {
            let (server, stop, backend) = (server.clone(), stop.clone(), self.backend.clone());
            let step_scope = crate::process::group::current();
            std::thread::spawn(move || {
                let _in = crate::process::group::within(step_scope);
                watch(&server, &stop, &backend, &local)
            })
        };
        StepCache {
            run: Some((socket, ready.cuda.is_ok())),
            server: Some(server),
            watch: Some((stop, thread)),
            uncached: ready
                .cuda
                .as_ref()
                .err()
                .map(|_| "nvcc ran without sccache".to_string()),
            shown,
        }
    }

    /// Ends the compile cache of a step: the step's statistics, and a warning when the backend
    /// went away during it.
    pub fn finish(&self, step: &Step, mut sc: StepCache, reporter: &dyn Reporter) -> Option<Stats> {
        let fell_back = sc.watch.take().and_then(|(stop, thread)| {
            stop.store(true, Ordering::Relaxed);
            thread.join().ok().flatten()
        });
        let mut stats = match &sc.server {
            Some(server) => {
                let mut s = server.lock().ok()?;
                let now = s.stats().ok();
                s.stop();
                now
            }
            None => None,
        }
        .unwrap_or_else(|| Stats {
            backend: sc.shown.clone(),
            ..Stats::default()
        });
        stats.backend = sc.shown.clone();
        stats.uncached = sc.uncached.take();
        if let Some((before, why)) = fell_back {
            stats.add(&before);
            let text = format!("{why}; the rest of the build compiled without it");
            self.warn("backend", reporter, step, &text);
            stats.uncached = Some(why);
        }
        Some(stats)
    }
}

/// Asks the backend every second until told to stop; when it does not answer, swaps the
/// server for a local one and returns what the first server saw and why.
fn watch(server: &Mutex<Server>, stop: &AtomicBool, backend: &Backend, local: &Path) -> Option<FellBack> {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(WATCH_EVERY);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Err(e) = backend.check(WATCH_EVERY) {
            let why = format!("the compile cache {} stopped answering ({e})", backend.shown());
            let mut s = server.lock().ok()?;
            let before = s.fall_back(local).unwrap_or_default();
            return Some((before, why));
        }
    }
    None
}
