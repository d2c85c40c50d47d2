//! What a serving process of this environment gets from kiln, for `doctor`: per installed
//! component with `[runtime] env` or `[aot]`, the variables the recipe sets at run time
//! (rendered for the target archs), whether the run-time file is in site-packages and what it
//! sets, and the modules `install --aot` put there with the SASS read back from them.
//!
//! It deliberately judges nothing: a missing file costs a first-request compile, not
//! correctness, so statuses stay as `resolve::status` says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Session;
use crate::probe::normalize;
use crate::probe::runtime::{self, RuntimeFile};
use crate::resolve;
use crate::settings::Settings;

/// One component's run-time setup.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeReport {
    pub component: String,
    /// `[runtime] env` rendered for the target archs and this machine.
    pub expected: BTreeMap<String, String>,
    /// Why `expected` could not be rendered (an arch spelling without a toolkit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cannot_render: Option<String>,
    pub file: RuntimeFile,
    /// The file is there and sets exactly `expected`.
    pub matches: bool,
    /// What `install --aot` installed (from `<dist-info>/kiln-aot.json`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aot: Vec<AotFile>,
}

/// One precompiled module in the environment.
#[derive(Debug, Clone, Serialize)]
pub struct AotFile {
    pub module: String,
    pub path: PathBuf,
    pub present: bool,
    pub sass: Vec<String>,
}

impl Session {
    /// The run-time setup of every installed component in scope that has one.
    pub fn runtime(&self, settings: &Settings) -> Vec<RuntimeReport> {
        let opts = resolve::plan::PlanOptions {
            archs: self.archs.clone(),
            jobs: settings.jobs,
            python: self.python.display().to_string(),
            compile_cache: None,
            tools: Default::default(),
            prebuilt: Default::default(),
            unprovable: Default::default(),
        };
        let mut out = Vec::new();
        for r in self.scope.iter().filter_map(|(n, _)| self.set.get(n)) {
            if r.runtime_env.is_empty() && r.aot.is_none() {
                continue;
            }
            let Some(d) = r.dist.as_deref().and_then(|d| self.facts.dists.get(&normalize(d))) else {
                continue;
            };
            let (Some(site), Some(info)) = (d.location.as_deref(), d.dist_info.as_deref()) else {
                continue;
            };
            let (expected, cannot_render) = match resolve::plan::runtime_env(r, Some(&d.version), &self.machine, &opts)
            {
                Ok(e) => (e, None),
                Err(e) => (BTreeMap::new(), Some(e)),
            };
            let file = runtime::read(Path::new(site), &r.name);
            let matches = file.env.as_ref() == Some(&expected) && cannot_render.is_none();
            let aot = super::aot::installed(Path::new(info))
                .map(|i| {
                    i.modules
                        .iter()
                        .map(|m| {
                            let path = Path::new(site).join(&m.install);
                            let sass = crate::fatbin::read_file(&path).map(|f| f.sass).unwrap_or_default();
                            AotFile {
                                module: m.module.clone(),
                                present: path.is_file(),
                                path,
                                sass,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(RuntimeReport {
                component: r.name.clone(),
                expected,
                cannot_render,
                file,
                matches,
                aot,
            });
        }
        out
    }
}
