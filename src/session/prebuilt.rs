//! Wheel or build in a session: for each component the plan would change whose chosen version
//! offers prebuilt wheels, pick the one this interpreter supports (its own tag list), fetch it
//! into the cache by its sha256, read its binaries and METADATA before anything is installed,
//! and let `resolve::wheel_choice` decide (with the backends the user needs, `--need`). What was
//! read is kept in a [`WheelMemo`] for the plan's second round (see `session::plan`), so a wheel
//! is fetched and read once per plan. The decisions go into the plan, which installs a
//! qualifying wheel instead of building. It deliberately ignores how the plan uses them.

use std::collections::BTreeMap;
use std::time::Instant;

use super::Session;
use crate::probe;
use crate::probe::wheel::WheelFacts;
use crate::resolve::solve::Solution;
use crate::resolve::status::Status;
use crate::resolve::wheel_choice::{self, Context, WheelDecision};
use crate::resolve::{Assessment, Reason, provable};
use crate::settings::Settings;
use crate::watch::Task;

/// What fetching and reading each wheel gave (by sha256), with the seconds each took.
pub(super) type WheelMemo = BTreeMap<String, (Result<WheelFacts, String>, f64, f64)>;

impl Session {
    /// The wheel-or-build decision of every component in `scope` that would change and whose
    /// chosen version offers wheels; and, by component, why a wheel read (and a build of the
    /// same source) cannot be proven on this machine ([`crate::resolve::provable`]). A wheel
    /// already in `memo` is not fetched or read again.
    pub(super) fn wheel_decisions(
        &self,
        settings: &Settings,
        solution: &Solution,
        scope: &[(String, Vec<String>)],
        assessments: &[Assessment],
        memo: &mut WheelMemo,
    ) -> (BTreeMap<String, WheelDecision>, BTreeMap<String, Reason>) {
        let mut out = BTreeMap::new();
        let mut unprovable = BTreeMap::new();
        if !settings.prebuilt {
            return (out, unprovable);
        }
        let planned: BTreeMap<String, (String, String)> = solution
            .chosen
            .iter()
            .filter_map(|(c, v)| {
                let dist = self.set.get(c)?.dist.as_deref()?;
                Some((probe::normalize(dist), (c.clone(), v.clone())))
            })
            .collect();
        let markers = self.facts.python.marker_environment();
        let mut tags: Option<Result<Vec<String>, String>> = None;
        let mut libraries: Option<Option<Vec<String>>> = None;
        for (name, _) in scope {
            let (Some(r), Some(chosen)) = (self.set.get(name), solution.chosen.get(name)) else {
                continue;
            };
            let Ok(version) = chosen.parse::<pep440_rs::Version>() else {
                continue;
            };
            let Some(entry) = r.version_entry(&version).filter(|e| !e.wheels.is_empty()) else {
                continue;
            };
            let Some(a) = assessments.iter().find(|a| &a.name == name) else {
                continue;
            };
            let installed = a.version.as_deref().map(|v| v.split('+').next().unwrap_or(v));
            let replaces = installed.is_some_and(|i| i != chosen);
            if !replaces && matches!(a.status, Status::Ok | Status::Outdated | Status::Unsupported) {
                continue;
            }
            let tags = tags.get_or_insert_with(|| match &self.node_tags {
                Some(t) => t.clone(),
                None if !self.facts.python.tags.is_empty() => Ok(self.facts.python.tags.clone()),
                None => probe::tags::cached(&self.python, &settings.cache_dir, settings.refresh),
            });
            let decision = match tags {
                Err(e) => WheelDecision::build(format!("builds from source: {e}"), None),
                Ok(tags) => match wheel_choice::pick(&entry.wheels, tags) {
                    None => WheelDecision::build(
                        format!(
                            "builds from source: no prebuilt wheel of {} {chosen} fits this interpreter (offered: {})",
                            r.name,
                            entry
                                .wheels
                                .iter()
                                .map(|w| w.file.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        None,
                    ),
                    Some(w) => {
                        let (facts, fetch_seconds, read_seconds) = memo
                            .entry(w.sha256.clone())
                            .or_insert_with(|| {
                                let started = Instant::now();
                                // Shown only once bytes flow: a wheel in the cache is no wait.
                                let cached = settings.watch.download_waiting(&r.name, &w.file, |progress, waiting| {
                                    crate::apply::prebuilt::fetch(
                                        &w.url,
                                        &w.sha256,
                                        &settings.cache_dir,
                                        settings.offline,
                                        crate::apply::source::Told {
                                            bytes: progress,
                                            waiting,
                                        },
                                    )
                                });
                                let fetch_seconds = started.elapsed().as_secs_f64();
                                let read = Instant::now();
                                let facts = cached.map_err(|e| e.to_string()).and_then(|p| {
                                    let judged = settings.watch.start(Task::WheelJudgement, &r.name, w.file.clone());
                                    let read = probe::wheel_cache::read(&settings.cache_dir, &p, &w.sha256);
                                    judged.finish(read.is_ok());
                                    read.map(|(f, _)| f)
                                });
                                (facts, fetch_seconds, read.elapsed().as_secs_f64())
                            })
                            .clone();
                        let mut d = match facts {
                            Err(e) => WheelDecision::build(
                                format!(
                                    "builds from source: the prebuilt wheel {} could not be had: {e}",
                                    w.file
                                ),
                                Some(w),
                            ),
                            Ok(facts) => {
                                if let Some(why) = provable::driver_needed(&facts.links_driver, &self.machine) {
                                    unprovable.insert(name.clone(), why);
                                }
                                let libraries = libraries.get_or_insert_with(|| match &self.for_node {
                                    Some(_) => self.node_libraries.clone(),
                                    None => probe::node::system_libraries(),
                                });
                                let missing =
                                    provable::system_needed(&facts.needed, &facts.provides, libraries.as_deref());
                                if let Some(why) = missing.into_iter().next() {
                                    unprovable.entry(name.clone()).or_insert(why);
                                }
                                wheel_choice::judge(
                                    w,
                                    &facts,
                                    &Context {
                                        recipe: r,
                                        version: Some(&version),
                                        archs: &self.archs,
                                        driver: self.machine.driver_cuda.as_ref(),
                                        toolkit: self.machine.cuda_toolkit.as_ref().map(|t| &t.version),
                                        planned: &planned,
                                        markers: markers.as_ref(),
                                        needs: &self.needs,
                                    },
                                )
                            }
                        };
                        d.fetch_seconds = fetch_seconds;
                        d.read_seconds = read_seconds;
                        d
                    }
                },
            };
            out.insert(name.clone(), decision);
        }
        (out, unprovable)
    }
}

impl Session {
    /// Blocks each build that links torch (`abi = true`) when the torch it builds against (kept
    /// as installed) is built for another CUDA major than the toolkit the build uses: torch's
    /// `cpp_extension` refuses it ("The detected CUDA version ... mismatches the version that was
    /// used to compile PyTorch", raised when the majors differ, torch/utils/cpp_extension.py:544-545
    /// in torch 2.11.0), and CMake builds would link two CUDA runtimes into one process.
    pub(super) fn flag_cuda_majors(&self, plan: &mut crate::resolve::Plan) {
        let Some(tk) = self.machine.cuda_toolkit.as_ref().map(|t| &t.version) else {
            return;
        };
        let torch_changes = plan.steps.iter().any(|s| s.name == "torch" && s.action.changes());
        let Some(cuda) = self.facts.torch.as_ref().and_then(|t| t.cuda.as_deref()) else {
            return;
        };
        let Some(rt) = crate::resolve::driver::Runtime::parse(cuda, "torch.version.cuda") else {
            return;
        };
        if torch_changes || rt.major == tk.major {
            return;
        }
        for step in plan.steps.iter_mut().filter(|s| s.build.is_some()) {
            let links_torch = self
                .set
                .get(&step.name)
                .is_some_and(|r| r.depends_with(&step.features).any(|d| d.abi && d.name == "torch"));
            if links_torch {
                step.action = crate::resolve::Action::Blocked;
                step.build = None;
                step.reasons.push(Reason::TorchCudaMajor {
                    torch_cuda: cuda.to_string(),
                    toolkit: tk.to_string(),
                    torch_major: rt.major,
                    toolkit_major: tk.major,
                });
            }
        }
    }
}
