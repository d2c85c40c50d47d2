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
        let (base, first) = self.installable(settings, &mut memo)?;
        let mut preferred = base.clone();
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

    /// The request and its plan, where every changing step installs a version its recipe has a
    /// source for. The solver prefers the installed version; a step that must change it (a
    /// wrong-arch torch 2.7.1+cu126, which no recipe entry describes) would otherwise say
    /// "reinstall torch 2.7.1" and install the recipe's source, another version (issue 19: plan
    /// said 2.7.1, install put in 2.14.1). Such versions are solved around (`!=`, preferred);
    /// where nothing else fits, the step is blocked, naming the versions the recipe has.
    fn installable(&self, settings: &Settings, memo: &mut WheelMemo) -> Result<(Request, Plan), Conflict> {
        let first = self.plan_for(settings, &self.request, memo)?;
        let unmade = |plan: &Plan| -> Vec<(String, String)> {
            plan.steps
                .iter()
                .filter(|s| s.action.changes())
                .filter_map(|s| {
                    let v = s.version.as_deref()?;
                    let r = self.set.get(&s.name)?;
                    let parsed = v.parse::<pep440_rs::Version>().ok()?;
                    (!r.describes(&parsed)).then(|| (s.name.clone(), v.to_string()))
                })
                .collect()
        };
        let stuck = unmade(&first);
        if stuck.is_empty() {
            return Ok((self.request.clone(), first));
        }
        let mut again = self.request.clone();
        for (name, v) in stuck.iter().filter(|(n, _)| !self.request.pins.contains_key(n)) {
            let text = format!("{name}!={v}");
            let Ok(spec) = format!("!={v}").parse() else { continue };
            again.prefer.entry(name.clone()).or_insert_with(|| Preference {
                text,
                spec,
                why: format!("{name} {v} is installed, but its recipe has no source to install it again"),
            });
        }
        let (request, mut plan) =
            match solve::solves(&self.set, &self.facts, &again).then(|| self.plan_for(settings, &again, memo)) {
                Some(Ok(second)) => (again, second),
                _ => (self.request.clone(), first),
            };
        for (name, v) in unmade(&plan) {
            let Some(step) = plan.steps.iter_mut().find(|s| s.name == name) else {
                continue;
            };
            let offered = self
                .set
                .get(&name)
                .map_or_else(Vec::new, |r| r.versions.iter().map(|e| e.version.to_string()).collect());
            step.action = Action::Blocked;
            step.build = None;
            step.reasons.push(resolve::Reason::NoSourceFor {
                component: name.clone(),
                version: v,
                offered,
            });
        }
        Ok((request, plan))
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
        // A component only other versions of its dependents need (flashinfer-cubin, which
        // sglang 0.5.11 pins, when 0.5.23 is chosen) is no step: the solver chose no version of it.
        scope.retain(|(n, _)| {
            solution.chosen.contains_key(n)
                || self.set.get(n).is_none_or(|r| r.kind != crate::recipe::Kind::Python)
                || self.installed(n).is_some()
        });
        let names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
        solve::explain_not_newest(&self.set, &self.facts, request, &mut solution, &names);
        // Another node's facts (`--for`) are all there is: nothing here can be probed again.
        if changed.is_empty() || self.for_node.is_some() {
            let assessments = if changed.is_empty() {
                self.scope_assessments.clone()
            } else {
                self.assess(&self.facts, &scope)
            };
            return Ok(self.plan_with(settings, &solution, &scope, &assessments, memo));
        }
        // Prove the extra components too (through the probe cache: only they are probed).
        let found = super::evidence::gather(
            settings,
            &self.set,
            &self.python,
            &self.machine,
            &self.archs,
            &scope,
            None,
        );
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
        crate::apply::memory::apply(&mut plan, &settings.cache_dir, &self.machine, settings.jobs);
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
        let launcher = crate::compile_cache::launcher::path(&settings.cache_dir);
        let wiring = crate::compile_cache::Wiring {
            sccache: crate::compile_cache::tool::planned(&settings.cache_dir)
                .display()
                .to_string(),
            nvcc,
            cxx_launcher: launcher.display().to_string(),
            // The user's own C++ compiler, which the launcher then runs in its place (never
            // the launcher itself: a kiln inside a build of kiln's sees that).
            cxx: std::env::var("CXX")
                .ok()
                .filter(|c| !c.is_empty() && std::path::Path::new(c) != launcher.as_path()),
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
                .and_then(|src| crate::apply::source::cached(src, cache).err())
                .map(|why| why.to_string())
                .into_iter()
                .collect();
            for input in step.build.iter().flat_map(|b| &b.inputs) {
                if let Err(why) = crate::apply::inputs::cached(input, cache) {
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
