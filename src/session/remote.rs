//! A session on another node's facts (`kiln plan --for FILE`, `kiln bundle --for FILE`): the
//! machine, interpreter, installed distributions, their binaries and the wheel tags come from the
//! file `kiln doctor --json` wrote on that node ([`crate::probe::node`]); nothing here is probed,
//! and no proof runs (a JIT or smoke proof of this host would say nothing about that node: the
//! node proves what it installs). It deliberately ignores this host's interpreter and GPUs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Session, SessionError, targets};
use crate::probe::cache::{CacheUse, Sources};
use crate::recipe::RecipeSet;
use crate::resolve;
use crate::settings::Settings;

impl Session {
    /// Opens a session on the node whose facts are in `file`; the target archs are `--arch`,
    /// else the node's GPUs.
    pub fn open_for(
        settings: &Settings,
        set: RecipeSet,
        targets: &[String],
        file: &Path,
    ) -> Result<Session, SessionError> {
        let node = crate::probe::node::read(file).map_err(|e| SessionError::Usage(e.to_string()))?;
        let tags = node.wheel_tags();
        let (wanted, pins) = targets::parse(&set, targets)?;
        let asked = if targets.is_empty() {
            Vec::new()
        } else {
            set.closure(&wanted).into_iter().map(|(n, _)| n).collect()
        };
        let mut node = node;
        resolve::driver_table::complete(&mut node.machine)
            .map_err(|e| SessionError::Usage(format!("{}: {e}", file.display())))?;
        let (archs, arch_source) = match &settings.archs {
            Some(a) => (a.clone(), "--arch".to_string()),
            None => (
                node.machine.gpu_archs(),
                format!("the GPUs of {} ({})", node.host, node.machine.gpu_source),
            ),
        };
        let scope = set.closure(&wanted);
        // The smoke tests the node ran on its GPUs count for the target archs they ran on; where
        // none ran for these archs, the archs they would run on (so one not run blocks nothing).
        let ran_for: Vec<_> = node.smoke_archs.iter().copied().filter(|a| archs.contains(a)).collect();
        let (smoke, smoke_archs) = if ran_for.is_empty() {
            (BTreeMap::new(), resolve::driver::smoke_archs(&node.machine, &archs))
        } else {
            (node.smoke, ran_for)
        };
        let needs = resolve::need::resolve(&set, &scope, &settings.needs).map_err(SessionError::Usage)?;
        let mut s = Session {
            set,
            python: PathBuf::from(&node.python.python.executable),
            python_source: "--for",
            machine: node.machine,
            archs,
            arch_source,
            scope,
            request: resolve::solve::Request {
                targets: wanted,
                pins,
                allow_replace: settings.allow_replace.iter().cloned().collect(),
                prefer: BTreeMap::new(),
            },
            facts: node.python,
            binaries: node.binaries,
            smoke,
            smoke_archs,
            jit: BTreeMap::new(),
            assessments: Vec::new(),
            scope_assessments: Vec::new(),
            probe_cache: CacheUse::Hit,
            probe_sources: Sources {
                distributions: CacheUse::Hit,
                imports: BTreeMap::new(),
                binaries: BTreeMap::new(),
                smoke: BTreeMap::new(),
                interpreters: 0,
                side_by_side: 0,
            },
            locked_wheels: BTreeMap::new(),
            needs,
            node_tags: Some(tags),
            node_libraries: node.system_libraries,
            for_node: Some(file.to_path_buf()),
            asked,
        };
        s.judge();
        Ok(s)
    }
}
