//! Which step builds when. A step's build starts once every step it depends on (directly or
//! through components the plan keeps) is installed and verified, and once the jobs the plan gave
//! it fit what is left of the machine's CPUs and memory (at most `--memory-limit`): each build
//! claims its planned jobs (one CPU each) and its memory (`memory_per_job` each, or the limit its
//! memory gate keeps its CUDA compiles within, [`super::gate`]) and gives them back when its wheel
//! is ready. The figures are the plan's: what earlier builds measured on this machine per unit
//! ([`super::unit_memory`]) or per job ([`super::memory`]), else the recipe's. With nothing else running a build always starts, so a
//! run never stalls. Installs are not scheduled here: they run one at a time, in the order
//! builds finish.
//!
//! It deliberately never changes a build's job count: what `kiln plan` shows is what runs (a
//! build that would fit with fewer jobs waits instead), so builds run side by side only when
//! their planned jobs fit together (`--jobs`, or memory per job, leave room). It ignores how
//! busy the machine already is beyond the memory available when the run starts.

use std::collections::BTreeSet;

use crate::probe::MachineFacts;
use crate::recipe::RecipeSet;
use crate::resolve::Plan;

/// CPUs and memory not claimed by a running build.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    total_cpus: usize,
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
            total_cpus: cpus.max(1),
            cpus: cpus.max(1),
            memory,
        }
    }

    /// The machine's CPUs and the memory available now, at most `limit` (`--memory-limit`).
    pub fn now(machine: &MachineFacts, limit: Option<u64>) -> Budget {
        let free = crate::probe::machine::memory_available().or(machine.memory_available);
        let memory = match (free, limit) {
            (Some(f), Some(l)) => Some(f.min(l)),
            (f, l) => f.or(l),
        };
        Budget::new(machine.cpus, memory)
    }

    /// Claims `jobs` jobs holding `memory` bytes together for a build ([`BuildSpec::memory`]);
    /// `None` while they do not fit beside the `running` builds. The CPUs claimed are at most
    /// the machine's (`--jobs` may ask for more), the memory at most what is free; with nothing
    /// running a build always starts.
    ///
    /// [`BuildSpec::memory`]: crate::resolve::spec::BuildSpec::memory
    pub fn claim(&mut self, jobs: usize, memory: Option<u64>, running: usize) -> Option<Claim> {
        let cpus = jobs.min(self.total_cpus);
        let memory = memory.unwrap_or(0);
        let fits = cpus <= self.cpus && self.memory.is_none_or(|free| memory <= free);
        if running > 0 && !fits {
            return None;
        }
        let cpus = cpus.min(self.cpus);
        let memory = memory.min(self.memory.unwrap_or(u64::MAX));
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
    fn builds_start_with_their_planned_jobs_once_those_fit() {
        // 16 CPUs, 40 GiB: a 4-job build of 10 GiB a job takes all the memory; the next waits.
        let mut b = Budget::new(16, Some(40 * GIB));
        let big = b.claim(4, Some(4 * 10 * GIB), 0).unwrap();
        assert_eq!(big.jobs, 4);
        assert_eq!(b.claim(1, Some(GIB), 1), None);
        // A build that needs no memory fits in the CPUs left, with the jobs it was planned.
        let small = b.claim(12, None, 1).unwrap();
        assert_eq!(small.jobs, 12);
        assert_eq!(b.claim(1, None, 2), None);
        b.release(big);
        b.release(small);
        assert_eq!(b, Budget::new(16, Some(40 * GIB)));
        // --jobs 1 on 2 CPUs: two builds side by side, a third waits.
        let mut b = Budget::new(2, None);
        let one = b.claim(1, None, 0).unwrap();
        let two = b.claim(1, None, 1).unwrap();
        assert_eq!((one.jobs, two.jobs), (1, 1));
        assert_eq!(b.claim(1, None, 2), None);
        // A build is never shrunk to fit: two planned jobs wait for two free CPUs.
        let mut b = Budget::new(4, None);
        let three = b.claim(3, None, 0).unwrap();
        assert_eq!(b.claim(2, None, 1), None);
        b.release(three);
        assert_eq!(b.claim(2, None, 0).map(|c| c.jobs), Some(2));
        // More memory than is free: with nothing running it still starts, with its planned jobs.
        let mut b = Budget::new(8, Some(GIB));
        assert_eq!(b.claim(2, Some(2 * 4 * GIB), 0).map(|c| c.jobs), Some(2));
        // --jobs is taken as given, even beyond the CPUs; the next build waits for a free CPU.
        let mut b = Budget::new(2, None);
        let wide = b.claim(4, None, 0).unwrap();
        assert_eq!(wide.jobs, 4);
        assert_eq!(b.claim(4, None, 1), None);
        b.release(wide);
        assert_eq!(b, Budget::new(2, None));
    }
}
