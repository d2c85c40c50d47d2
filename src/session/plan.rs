//! Planning in a session: choose versions with the solver, widen the scope to installed
//! components the solution replaces (proving those too), plan, and — offline — block every
//! step whose source or declared build inputs the cache lacks, before anything runs. It deliberately ignores carrying
//! the plan out.
//!
//! Prefer the versions that let an offered wheel qualify: the first plan is made with the newest
//! versions the constraints allow. Where a prebuilt wheel of a step is refused for its
//! `Requires-Dist` pins alone (vLLM 0.33.0's wheel pins torch==2.14.0 while the newest torch
//! the recipes allow is 2.14.1), those pins become preferences ([`solve::Preference`]) and the
//! request is solved again with them. The second plan is taken only when it has a solution
//! and a wheel refused for its pins then qualifies; otherwise the first stands. A pin of the
//! user's always wins over a preference. The pins of every such wheel are preferred at once: two
//! wheels that pin one component differently leave the first plan (the second solve fails).

use super::Session;
use super::prebuilt::WheelMemo;
use crate::resolve::solve::{self, Conflict, Preference, Request, Solution};
use crate::resolve::{self, Action, Assessment, Plan, PlanOptions};
use crate::settings::Settings;

impl Session {
    /// Chooses versions, then plans; again with the pins of a wheel refused for them alone
    /// preferred (see the module doc). A conflict comes back with its explanation.
    pub fn plan(&self, settings: &Settings) -> Result<Plan, Conflict> {
        let mut memo = WheelMemo::new();
        let first = self.plan_for(settings, &self.request, &mut memo)?;
        let mut preferred = self.request.clone();
        let mut waiting: Vec<&str> = Vec::new();
        for step in &first.steps {
            let Some(d) = step.prebuilt.as_ref().filter(|d| d.refused_for_pins_only()) else {
                continue;
            };
            let file = d.wheel.as_ref().map_or("", |w| w.file.as_str());
            waiting.push(&step.name);
            for p in d.pins.iter().filter(|p| !self.request.pins.contains_key(&p.component)) {
                preferred
                    .prefer
                    .entry(p.component.clone())
                    .or_insert_with(|| Preference {
                        text: p.requires.clone(),
                        spec: p.spec.clone(),
                        why: format!(
                            "the prebuilt wheel {file} pins {} (its Requires-Dist), preferred so that it qualifies",
                            p.requires
                        ),
                    });
            }
        }
        if preferred.prefer.is_empty() || !solve::solves(&self.set, &self.facts, &preferred) {
            return Ok(first);
        }
        let Ok(second) = self.plan_for(settings, &preferred, &mut memo) else {
            return Ok(first);
        };
        let qualifies = |name: &str| {
            second
                .steps
                .iter()
                .any(|s| s.name == name && s.prebuilt.as_ref().is_some_and(|d| d.install))
        };
        Ok(if waiting.iter().any(|n| qualifies(n)) {
            second
        } else {
            first
        })
    }

    /// Chooses versions for `request`, then plans.
    fn plan_for(&self, settings: &Settings, request: &Request, memo: &mut WheelMemo) -> Result<Plan, Conflict> {
        let mut solution = solve::solve(&self.set, &self.facts, request)?;
        // Installed components outside the targets' closure whose version the solver changed
        // (allowed by --allow-replace) are part of the plan too.
        let mut scope = self.scope.clone();
        let changed: Vec<(String, Vec<String>)> = solution
            .chosen
            .iter()
            .filter(|(name, v)| {
                !scope.iter().any(|(n, _)| n == *name)
                    && self
                        .installed(name)
                        .is_some_and(|d| d.version.split('+').next() != Some(v.as_str()))
            })
            .map(|(n, _)| (n.clone(), Vec::new()))
            .collect();
        if !changed.is_empty() {
            let mut all = scope.clone();
            all.extend(changed.iter().cloned());
            scope = self.set.closure(&all);
        }
        let names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
        solve::explain_not_newest(&self.set, &self.facts, request, &mut solution, &names);
        // Another node's facts (`--for`) are all there is: nothing here can be probed again.
        if changed.is_empty() || self.for_node.is_some() {
            let assessments = if changed.is_empty() {
                self.assessments.clone()
            } else {
                self.assess(&self.facts, &scope)
            };
            return Ok(self.plan_with(settings, &solution, &scope, &assessments, memo));
        }
        // Prove the extra components too (through the probe cache: only they are probed).
        let found = super::evidence::gather(settings, &self.set, &self.python, &self.machine, &self.archs, &scope);
        let assessments = match found {
            Ok(mut found) => {
                crate::probe::owners::fill(&mut found.probed.facts, &super::import_packages(&self.set, &scope));
                self.assess(&found.probed.facts, &scope)
            }
            Err(e) => {
                return Err(Conflict::failed(format!("cannot probe the environment again: {e}")));
            }
        };
        Ok(self.plan_with(settings, &solution, &scope, &assessments, memo))
    }

    fn plan_with(
        &self,
        settings: &Settings,
        solution: &Solution,
        scope: &[(String, Vec<String>)],
        assessments: &[Assessment],
        memo: &mut WheelMemo,
    ) -> Plan {
        let (prebuilt, unprovable) = self.wheel_decisions(settings, solution, scope, assessments, memo);
        let mut plan = resolve::plan::make(
            &self.set,
            &self.machine,
            scope,
            assessments,
            solution,
            &PlanOptions {
                archs: self.archs.clone(),
                jobs: settings.jobs,
                python: self.python.display().to_string(),
                compile_cache: self.compile_cache_wiring(settings),
                tools: resolve::tools::ToolPlace {
                    dir: Some(settings.cache_dir.join("tools")),
                    offline: settings.offline,
                },
                prebuilt,
                unprovable,
            },
        );
        self.flag_cuda_majors(&mut plan);
        // A build measured on this machine says better than the recipe what a job takes.
        crate::build::memory::apply(&mut plan, &settings.cache_dir, &self.machine, settings.jobs);
        if settings.offline {
            self.block_uncached(&mut plan, settings);
        }
        plan
    }

    /// `--compile-cache`: the backend as shown, and sccache (on `PATH`, else the copy kiln
    /// keeps in its cache) in front of the host compilers and this machine's nvcc.
    fn compile_cache_wiring(&self, settings: &Settings) -> Option<(String, crate::compile_cache::Wiring)> {
        let backend = settings.compile_cache.as_ref()?;
        let nvcc = self
            .machine
            .cuda_toolkit
            .as_ref()
            .and_then(|t| t.home.as_ref())
            .map(|h| h.join("bin").join("nvcc").display().to_string());
        let wiring = crate::compile_cache::Wiring {
            sccache: crate::compile_cache::tool::planned(&settings.cache_dir)
                .display()
                .to_string(),
            nvcc,
        };
        Some((backend.shown(), wiring))
    }

    /// Offline, a step whose source or any of whose declared build inputs the cache lacks is
    /// blocked now, not after the steps before it have run: they cannot be had. Each missing
    /// one is named.
    fn block_uncached(&self, plan: &mut Plan, settings: &Settings) {
        let cache = &settings.cache_dir;
        // A prebuilt wheel the plan installs was fetched (or found in the cache) to judge it.
        let prebuilt = |s: &resolve::Step| s.prebuilt.as_ref().is_some_and(|d| d.install);
        for step in plan.steps.iter_mut().filter(|s| s.action.changes() && !prebuilt(s)) {
            let mut missing: Vec<String> = self
                .set
                .get(&step.name)
                .and_then(|r| r.source_of(step.version.as_deref()))
                .and_then(|src| crate::build::source::cached(src, cache).err())
                .map(|why| why.to_string())
                .into_iter()
                .collect();
            for input in step.build.iter().flat_map(|b| &b.inputs) {
                if let Err(why) = crate::build::inputs::cached(input, cache) {
                    missing.push(format!("build input `{}`: {why}", input.name));
                }
            }
            if !missing.is_empty() {
                step.action = Action::Blocked;
                step.reasons.push(resolve::Reason::Offline { missing });
            }
        }
    }
}
