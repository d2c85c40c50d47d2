//! Carrying out a plan in a session: the build context from the session and the settings, the
//! step logs under a fresh run directory, and the event log (`events.jsonl`) beside them, teed
//! with the caller's progress reporter. It deliberately ignores drawing anything from the
//! events (the timings report is `report`'s).

use std::path::PathBuf;

use super::Session;
use crate::apply::{self, Context, Reporter, RunReport, events, install::Installer};
use crate::resolve::Plan;
use crate::settings::Settings;

/// What [`Session::execute`] did, and where it left its records.
pub struct Executed {
    pub report: RunReport,
    /// The run's log directory: step logs and `events.jsonl`.
    pub logs: PathBuf,
    /// The event log (absent when it could not be created).
    pub events: PathBuf,
}

impl Session {
    /// Builds, installs and verifies every changing step of `plan`, telling `progress` (and
    /// the event log) as it goes.
    pub fn execute(&self, settings: &Settings, plan: &Plan, progress: &(dyn Reporter + Sync)) -> Executed {
        let cache = settings.cache_dir.clone();
        let logs = cache.join("logs").join(apply::run_stamp());
        let cx = Context {
            set: &self.set,
            machine: &self.machine,
            python: self.python.clone(),
            cache,
            logs: logs.clone(),
            installer: Installer::for_cache(&settings.cache_dir, settings.offline, &settings.watch)
                .find_links(Some(crate::cache_dir::wheelhouse(&settings.cache_dir)).filter(|d| d.is_dir())),
            import_timeout: settings.import_timeout,
            facts: &self.facts,
            offline: settings.offline,
            locked_wheels: self.locked_wheels.clone(),
            stall: settings.stall,
            limit: settings.limit,
            compile_cache: settings.compile_cache.clone().map(|b| {
                apply::compile::CompileCache::new(
                    b,
                    &settings.cache_dir,
                    settings.offline,
                    &plan.archs,
                    &settings.watch,
                )
            }),
            keep_done: settings.keep_done,
            memory_limit: settings.memory_limit,
            overlays: apply::overlay::Shared::new(&settings.cache_dir),
        };
        let events_path = logs.join("events.jsonl");
        let report = match events::EventLog::create(&events_path) {
            Ok(log) => apply::execute(plan, &cx, &events::Tee(progress, &log)),
            Err(_) => apply::execute(plan, &cx, progress),
        };
        Executed {
            report,
            logs,
            events: events_path,
        }
    }
}
