//! Memory per compile job, measured: after a wheel command ran to the end, the peak resident
//! memory of its process group and their descendants (sampled by `process`) divided by the jobs
//! it ran with is kept in the cache under `<cache>/memory/<host>/<component>.json`, and the next
//! plan on that machine takes it as the step's `memory_per_job` (over the recipe's), with the
//! jobs that fit it, and says where the figure came from. The scheduler reserves it for each job
//! like any other. Where the build's CUDA units were measured one by one
//! ([`super::unit_memory`]), those figures size it instead, within what this figure allows.
//!
//! The per-job figure errs high: the group's RSS is summed over its members (pages they share
//! count once per member) and includes the front end and the build system, not only the
//! compilers. It deliberately ignores how the next build differs (another version, other archs):
//! the latest measurement on the machine is the estimate, and an OOM kill still halves the jobs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::probe::MachineFacts;
use crate::resolve::Plan;

/// One measured wheel build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub component: String,
    #[serde(default)]
    pub version: Option<String>,
    /// The process group's peak resident memory, in bytes.
    pub peak: u64,
    /// The compile jobs it ran with.
    pub jobs: usize,
    /// Seconds since the epoch.
    pub when: u64,
}

impl Measured {
    pub fn new(component: &str, version: Option<&str>, peak: u64, jobs: usize) -> Measured {
        let when = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Measured {
            component: component.to_string(),
            version: version.map(str::to_string),
            peak,
            jobs: jobs.max(1),
            when,
        }
    }

    /// The estimate for one job: the peak over the jobs, rounded up.
    pub fn per_job(&self) -> u64 {
        self.peak.div_ceil(self.jobs.max(1) as u64).max(1)
    }

    /// `measured on gpu-node-1: peak 6.8 GiB with 2 jobs (flash-attn 2.8.3)`.
    pub fn describe(&self, host: &str) -> String {
        let version = self.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        format!(
            "measured on {host}: peak {} with {} job{} ({}{version})",
            human(self.peak),
            self.jobs,
            if self.jobs == 1 { "" } else { "s" },
            self.component
        )
    }
}

/// `6.8 GiB`, `512.0 MiB`.
pub fn human(bytes: u64) -> String {
    bytesize::ByteSize(bytes).display().iec().to_string()
}

/// This machine's name, which keys its measurements (`/proc/sys/kernel/hostname`).
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && !h.contains(['/', '\0']) && h != "." && h != "..")
        .unwrap_or_else(|| "this-machine".into())
}

fn path(cache: &Path, host: &str, component: &str) -> PathBuf {
    cache.join("memory").join(host).join(format!("{component}.json"))
}

/// Keeps `m` as this machine's latest measurement of its component (replacing the last).
pub fn record(cache: &Path, m: &Measured) -> std::io::Result<()> {
    let p = path(cache, &host(), &m.component);
    let bytes = serde_json::to_vec_pretty(m).map_err(std::io::Error::other)?;
    crate::store::atomic::write(&p, &bytes, crate::store::atomic::Sync::Cache)
}

/// This machine's latest measurement of `component`, if any.
pub fn load(cache: &Path, component: &str) -> Option<Measured> {
    crate::state::cached_json::<Measured>(&path(cache, &host(), component)).filter(|m| m.peak > 0)
}

/// Gives every build step of `plan` this machine's measurement of its component as its memory
/// estimate, where there is one, with the jobs that fit it (unless `--jobs` said); the others
/// keep the recipe's `memory_per_job`. A build whose CUDA compiles go through the memory gate
/// and whose units were measured here ([`super::unit_memory`]) is sized by those figures
/// instead: as many jobs as the smallest unit allows in the memory available (at most the
/// CPUs), the largest unit as its figure per job, and that memory (at most the jobs times the
/// largest) as the limit its gate keeps the compiles within.
pub fn apply(plan: &mut Plan, cache: &Path, machine: &MachineFacts, explicit_jobs: Option<usize>) {
    let host = host();
    for step in &mut plan.steps {
        let Some(spec) = step.build.as_mut() else { continue };
        let units = spec
            .nvcc
            .as_ref()
            .and_then(|_| super::unit_memory::load(cache, &spec.memory_key));
        if let Some((u, (small, large))) = units.as_ref().and_then(|u| Some((u, u.range()?))) {
            // The jobs also run what the gate does not see (host C++ compiles, links): never
            // more than the whole build's measured figure per job allows.
            let by_units = crate::resolve::plan::jobs_for(Some(small), machine, explicit_jobs);
            let by_build = load(cache, &step.name)
                .map(|m| crate::resolve::plan::jobs_for(Some(m.per_job()), machine, explicit_jobs));
            spec.jobs = by_build.map_or(by_units, |b| b.min(by_units));
            let all_large = large.saturating_mul(spec.jobs as u64);
            spec.memory_limit = Some(machine.memory_available.map_or(all_large, |m| m.min(all_large)));
            spec.memory_per_job = Some(large);
            spec.memory_from = Some(u.describe(&host));
        } else if let Some(m) = load(cache, &step.name) {
            let per_job = m.per_job();
            spec.memory_per_job = Some(per_job);
            spec.jobs = crate::resolve::plan::jobs_for(Some(per_job), machine, explicit_jobs);
            spec.memory_from = Some(m.describe(&host));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measurement_is_kept_per_machine_and_component_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path(), "flash-attn"), None);
        let m = Measured::new("flash-attn", Some("2.8.3"), 7 << 30, 2);
        record(dir.path(), &m).unwrap();
        assert_eq!(load(dir.path(), "flash-attn"), Some(m.clone()));
        assert!(dir.path().join("memory").join(host()).join("flash-attn.json").is_file());
        assert_eq!(m.per_job(), 7 << 29);
        assert_eq!(
            m.describe("node-1"),
            "measured on node-1: peak 7.0 GiB with 2 jobs (flash-attn 2.8.3)"
        );
        // Later measurements replace earlier ones.
        let again = Measured::new("flash-attn", None, 3 << 30, 1);
        record(dir.path(), &again).unwrap();
        assert_eq!(load(dir.path(), "flash-attn").map(|m| m.per_job()), Some(3 << 30));
        assert_eq!(Measured::new("x", None, 10, 0).per_job(), 10, "jobs are at least one");
        assert_eq!(Measured::new("x", None, 10, 3).per_job(), 4, "rounded up");
    }
}
