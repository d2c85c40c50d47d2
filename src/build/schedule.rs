//! Which step builds when. A step's build starts once every step it depends on (directly or
//! through components the plan keeps) is installed and verified, and while the machine's CPUs
//! and memory last: each build claims its compile jobs (one CPU and `memory_per_job` each) and
//! gives them back when its wheel is ready. Installs are not scheduled here: they run one at a
//! time, in the order builds finish.
//!
//! It deliberately ignores how busy the machine already is beyond the memory available when the
//! run starts, and never splits the budget in advance: the first build ready takes what it can
//! use (all CPUs, unless `--jobs` or memory limit it), and builds run side by side only while
//! something is left.

use std::collections::BTreeSet;

use crate::probe::MachineFacts;
use crate::recipe::RecipeSet;
use crate::resolve::Plan;

/// CPUs and memory not claimed by a running build.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    cpus: usize,
    memory: Option<u64>,
}

/// What one build holds: the jobs it runs, and the CPUs and memory it took from the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claim {
    pub jobs: usize,
    cpus: usize,
    memory: u64,
}

impl Budget {
    pub fn new(cpus: usize, memory: Option<u64>) -> Budget {
        Budget {
            cpus: cpus.max(1),
            memory,
        }
    }

    /// The machine's CPUs and the memory available now.
    pub fn now(machine: &MachineFacts) -> Budget {
        Budget::new(
            machine.cpus,
            crate::probe::machine::memory_available().or(machine.memory_available),
        )
    }

    /// Jobs for a build of `per_job` bytes a job; `None` when it must wait for a running one
    /// to finish. `explicit` (`--jobs`) is the user's word for the job count, but a build still
    /// waits while no CPU, or not one job's memory, is free. With nothing running a build always
    /// starts, with at least one job, so a run never stalls on a small machine.
    pub fn claim(&mut self, per_job: Option<u64>, explicit: Option<usize>, running: usize) -> Option<Claim> {
        let by_memory = match (per_job, self.memory) {
            (Some(per), Some(free)) if per > 0 => (free / per) as usize,
            _ => usize::MAX,
        };
        if running > 0 && (self.cpus == 0 || by_memory == 0) {
            return None;
        }
        let jobs = crate::resolve::plan::jobs_within(per_job, self.cpus, self.memory, explicit);
        let cpus = jobs.min(self.cpus);
        let memory = per_job
            .unwrap_or(0)
            .saturating_mul(jobs as u64)
            .min(self.memory.unwrap_or(u64::MAX));
        self.cpus -= cpus;
        if let Some(m) = self.memory.as_mut() {
            *m -= memory;
        }
        Some(Claim { jobs, cpus, memory })
    }

    pub fn release(&mut self, c: Claim) {
        self.cpus += c.cpus;
        if let Some(m) = self.memory.as_mut() {
            *m += c.memory;
        }
    }
}

/// For each step of the plan: the steps that change something and must be installed before it
/// builds (its dependencies in the plan, followed through the ones the plan keeps).
pub fn waits(plan: &Plan, set: &RecipeSet) -> Vec<Vec<usize>> {
    let index: std::collections::HashMap<&str, usize> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    let direct = |i: usize| -> Vec<usize> {
        let step = &plan.steps[i];
        set.get(&step.name)
            .map(|r| {
                r.depends_with(&step.features)
                    .filter_map(|d| index.get(d.name.as_str()).copied())
                    .collect()
            })
            .unwrap_or_default()
    };
    (0..plan.steps.len())
        .map(|i| {
            let mut seen = BTreeSet::new();
            let mut stack = direct(i);
            while let Some(j) = stack.pop() {
                if j != i && seen.insert(j) {
                    stack.extend(direct(j));
                }
            }
            seen.into_iter().filter(|&j| plan.steps[j].action.changes()).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn builds_share_cpus_and_memory_and_the_first_always_gets_a_job() {
        // 16 CPUs, 40 GiB: a 10 GiB-a-job build takes 4 jobs and all the memory.
        let mut b = Budget::new(16, Some(40 * GIB));
        let big = b.claim(Some(10 * GIB), None, 0).unwrap();
        assert_eq!(big.jobs, 4);
        assert_eq!(b.claim(Some(GIB), None, 1), None);
        b.release(big);
        assert_eq!(b, Budget::new(16, Some(40 * GIB)));
        // --jobs 1 on 2 CPUs: two builds side by side, a third waits.
        let mut b = Budget::new(2, None);
        let one = b.claim(None, Some(1), 0).unwrap();
        let two = b.claim(None, Some(1), 1).unwrap();
        assert_eq!((one.jobs, two.jobs), (1, 1));
        assert_eq!(b.claim(None, Some(1), 2), None);
        // Too little memory for one job: with nothing running it still gets one.
        let mut b = Budget::new(8, Some(GIB));
        assert_eq!(b.claim(Some(4 * GIB), None, 0).map(|c| c.jobs), Some(1));
        // --jobs is taken as given, even beyond the CPUs; the next build waits for a free CPU.
        let mut b = Budget::new(2, None);
        let wide = b.claim(None, Some(4), 0).unwrap();
        assert_eq!(wide.jobs, 4);
        assert_eq!(b.claim(None, Some(4), 1), None);
        b.release(wide);
        assert_eq!(b, Budget::new(2, None));
    }
}
