//! `kiln check`: a serving command line judged for this machine and the target archs. The
//! engine's version is the installed one, else the one the targets pin, else what a plan would
//! install (the solver's choice, nothing fetched); the values a flag accepts come from the
//! installed engine's own source; the model is read from its local directory. It deliberately
//! ignores how the answer is shown.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{Session, SessionError};
use crate::arch::Arch;
use crate::probe::model::{self, ModelConfig};
use crate::recipe::serving::Selector;
use crate::resolve::serving::cmdline::ServeCommand;
use crate::resolve::serving::workload::{self, Workload};
use crate::resolve::serving::{self, Verdict};
use crate::resolve::solve;
use crate::settings::Settings;

/// Where the engine's version came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VersionFrom {
    Installed,
    Pinned,
    Plan,
    Unknown,
}

/// The values the installed engine accepts for a flag, and the file they were read from.
#[derive(Debug, Clone, Serialize)]
pub struct Choices {
    pub selector: Selector,
    pub values: Vec<String>,
    pub file: String,
}

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub engine: String,
    pub version: Option<String>,
    pub version_from: VersionFrom,
    pub archs: Vec<Arch>,
    pub model: ModelConfig,
    pub workload: Workload,
    pub command: ServeCommand,
    pub choices: Vec<Choices>,
    pub verdicts: Vec<Verdict>,
    pub works: Option<bool>,
    /// What `kiln install` would add for the verdicts that are not proven yet.
    pub install: Vec<String>,
    /// Environment variables on the command line that no backend fact of this engine reads: not
    /// judged (the engine may ignore them, or kiln has no facts for them).
    pub unjudged_env: Vec<String>,
    /// The chosen backends whose own CUDA binaries must hold the arch (`--need` for install:
    /// a prebuilt wheel without them is then built from source).
    pub need: Vec<String>,
}

impl Session {
    /// Judges `cmd` (its engine is in this session's scope). The JIT modules the chosen backends
    /// need are taken from the JIT cache, and compiled first with `compile_jit`.
    pub fn check(&self, settings: &Settings, cmd: ServeCommand, compile_jit: bool) -> Result<Check, SessionError> {
        let consumer = self
            .set
            .get(&cmd.engine)
            .ok_or_else(|| SessionError::Usage(format!("no recipe named `{}`", cmd.engine)))?;
        let (version, version_from) = match self.installed_version(&cmd.engine) {
            Some(v) => (Some(v), VersionFrom::Installed),
            None => match solve::solve(&self.set, &self.facts, &self.request) {
                Ok(sol) => {
                    let from = if self.request.pins.contains_key(&cmd.engine) {
                        VersionFrom::Pinned
                    } else {
                        VersionFrom::Plan
                    };
                    match sol.chosen.get(&cmd.engine).and_then(|v| v.parse().ok()) {
                        Some(v) => (Some(v), from),
                        None => (None, VersionFrom::Unknown),
                    }
                }
                Err(_) => (None, VersionFrom::Unknown),
            },
        };
        if self.archs.is_empty() {
            return Err(SessionError::Usage(format!(
                "no target arch: no GPU found here ({}); name the GPU the command is for, e.g. `--arch 12.0`",
                self.machine.gpu_source
            )));
        }
        if version.is_none() {
            let offered: Vec<String> = consumer.versions.iter().map(|v| v.version.to_string()).collect();
            let asked = self
                .request
                .pins
                .get(&cmd.engine)
                .map(|(text, _)| format!("`{text}`"))
                .unwrap_or_else(|| "the targets".into());
            return Err(SessionError::Usage(format!(
                "no version of {} fits {asked} with what is installed; kiln's recipes offer {}",
                cmd.engine,
                offered.join(", ")
            )));
        }
        let dir = cmd.model.as_deref().unwrap_or_default();
        let model = model::read(Path::new(dir)).map_err(|e| SessionError::Usage(e.to_string()))?;
        let workload =
            workload::of(&model).map_err(|e| SessionError::Usage(format!("{}: {e}", model.dir.display())))?;
        let choices = self.installed_choices(&cmd.engine, version.as_ref());
        let by_selector: BTreeMap<Selector, (Vec<String>, String)> = choices
            .iter()
            .map(|c| (c.selector.clone(), (c.values.clone(), c.file.clone())))
            .collect();
        let req = serving::Request {
            consumer,
            version: version.clone(),
            archs: &self.archs,
            workload: &workload,
            user: &cmd.values,
            choices: &by_selector,
        };
        let mut ev = self.serving_evidence();
        let first = serving::check(&req, &ev);
        ev.jit_modules = self.module_proofs(settings, consumer, version.as_ref(), &first, compile_jit);
        let verdicts = if ev.jit_modules.is_empty() {
            first
        } else {
            serving::check(&req, &ev)
        };
        let mut install: Vec<String> = Vec::new();
        for i in verdicts.iter().flat_map(|v| v.install.iter()) {
            if !install.contains(i) {
                install.push(i.clone());
            }
        }
        let need: Vec<String> = verdicts
            .iter()
            .filter(|v| v.works != Some(false))
            .filter_map(|v| serving::judge::fact(consumer, version.as_ref(), &v.selector, &v.value))
            .filter(|b| b.binaries.is_some())
            .map(|b| b.spelled())
            .fold(Vec::new(), |mut acc, n| {
                if !acc.contains(&n) {
                    acc.push(n);
                }
                acc
            });
        let unjudged_env: Vec<String> = cmd
            .values
            .keys()
            .filter(|k| matches!(k, Selector::Env(_)))
            .filter(|k| !consumer.backends.iter().any(|b| &b.selector == *k))
            .map(|k| k.name().to_string())
            .collect();
        Ok(Check {
            engine: cmd.engine.clone(),
            need,
            unjudged_env,
            version: version.map(|v| v.to_string()),
            version_from,
            archs: self.archs.clone(),
            works: serving::works(&verdicts),
            model,
            workload,
            command: cmd,
            choices,
            verdicts,
            install,
        })
    }

    /// The proofs of the JIT modules the chosen values need, per component: cached ones, or
    /// compiled now with `compile`.
    fn module_proofs(
        &self,
        settings: &Settings,
        consumer: &crate::recipe::Recipe,
        version: Option<&pep440_rs::Version>,
        verdicts: &[Verdict],
        compile: bool,
    ) -> BTreeMap<String, crate::probe::jit::JitOutcome> {
        let mut wanted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for v in verdicts {
            let Some(b) = serving::judge::fact(consumer, version, &v.selector, &v.value) else {
                continue;
            };
            for (component, kernel) in &b.jit {
                let list = wanted.entry(component.clone()).or_default();
                if !list.contains(kernel) {
                    list.push(kernel.clone());
                }
            }
        }
        let mut out = BTreeMap::new();
        for (component, kernels) in wanted {
            let Some(r) = self.set.get(&component) else { continue };
            let proof = super::jit::prove_kernels(self, settings, r, &kernels, compile);
            if let Some(p) = proof {
                out.insert(component, p);
            }
        }
        out
    }

    /// The values the installed `engine` accepts, for each `[[serving.choices]]` of its version
    /// whose file it has; none when it is not installed.
    fn installed_choices(&self, engine: &str, version: Option<&pep440_rs::Version>) -> Vec<Choices> {
        let (Some(r), Some(dist)) = (self.set.get(engine), self.installed(engine)) else {
            return Vec::new();
        };
        let Some(loc) = dist.location.as_deref() else {
            return Vec::new();
        };
        let wanted: Vec<_> = r
            .serving
            .choices
            .iter()
            .filter(|c| c.when.version_matches(version))
            .collect();
        let asks: Vec<(std::path::PathBuf, String, bool)> = wanted
            .iter()
            .map(|c| (Path::new(loc).join(&c.file), c.name.clone(), c.member_names))
            .collect();
        let answers = crate::probe::choices::read(&self.python, &asks).unwrap_or_default();
        wanted
            .iter()
            .zip(answers)
            .filter_map(|(c, a)| {
                Some(Choices {
                    selector: c.selector.clone(),
                    values: a?,
                    file: format!("{}:{}", c.file, c.name),
                })
            })
            .collect()
    }
}
