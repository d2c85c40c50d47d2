//! A node's facts, for planning elsewhere: everything a plan for that node needs — the machine
//! (GPUs, driver and its CUDA, toolkit, host compiler, CPUs, memory), the interpreter and every
//! installed distribution with the imports the probe ran, the CUDA binaries of those
//! distributions, the wheel tags the interpreter supports, and the shared libraries its dynamic
//! loader can find. `kiln doctor --json` carries them under `node`; `kiln plan --for FILE` and
//! `kiln bundle --for FILE` read them back. It deliberately holds facts only: proofs (JIT, smoke,
//! serving) belong to the node: only the smoke tests it ran on its own GPUs travel, as what they
//! are, and nothing this host could prove is added.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::MachineFacts;
use super::binaries::Binaries;
use super::python::PythonFacts;
use crate::process::Cmd;

/// The version of this document; a reader refuses another.
pub const FORMAT: u32 = 1;

/// Everything a plan for a node needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeFacts {
    pub format: u32,
    /// The node's name, as it calls itself (`/proc/sys/kernel/hostname`).
    pub host: String,
    pub machine: MachineFacts,
    pub python: PythonFacts,
    /// Wheel tags the interpreter supports, best first (`packaging.tags.sys_tags()`).
    pub tags: Vec<String>,
    /// Why they could not be read there (then `tags` is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags_error: Option<String>,
    /// CUDA binaries of the installed distributions, by normalized name.
    pub binaries: BTreeMap<String, Binaries>,
    /// The smoke tests the node ran on its own GPUs (a proof made there), and the archs they ran on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub smoke: BTreeMap<String, super::smoke::SmokeResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub smoke_archs: Vec<crate::arch::Arch>,
    /// Shared-object names the dynamic loader finds in its cache (`ldconfig -p`), sorted; `None`
    /// when they could not be read.
    pub system_libraries: Option<Vec<String>>,
}

/// Why a facts file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, String),
    #[error(
        "{0}: not a node's facts ({1}); write them on the node with `kiln doctor --json > node.json` (its `node` part)"
    )]
    Shape(PathBuf, String),
    #[error(
        "{0}: facts format {1}, this kiln reads format {FORMAT}; write them again with this kiln's `kiln doctor --json`"
    )]
    Format(PathBuf, u32),
}

impl NodeFacts {
    /// The node's wheel tags, or why it has none.
    pub fn wheel_tags(&self) -> Result<Vec<String>, String> {
        match &self.tags_error {
            Some(e) if self.tags.is_empty() => Err(e.clone()),
            _ => Ok(self.tags.clone()),
        }
    }
}

/// A facts file larger than this is not one (a big environment's is a few MiB).
const MAX_BYTES: u64 = 256 << 20;

/// Reads a node's facts: a whole `kiln doctor --json` document (its `node` part) or the part alone.
pub fn read(path: &Path) -> Result<NodeFacts, NodeError> {
    let read = |e: String| NodeError::Read(path.to_path_buf(), e);
    let meta = std::fs::metadata(path).map_err(|e| read(e.to_string()))?;
    if !meta.is_file() {
        return Err(read("not a regular file".into()));
    }
    if meta.len() > MAX_BYTES {
        return Err(read(format!("{} bytes, more than a node's facts can be", meta.len())));
    }
    let text = std::fs::read_to_string(path).map_err(|e| read(e.to_string()))?;
    let shape = |e: String| NodeError::Shape(path.to_path_buf(), e);
    let mut v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| shape(format!("invalid JSON at line {} column {}: {e}", e.line(), e.column())))?;
    if let Some(node) = v.get_mut("node") {
        v = node.take();
    }
    match v.get("format").and_then(|f| f.as_u64()) {
        Some(f) if f == u64::from(FORMAT) => {}
        Some(f) => return Err(NodeError::Format(path.to_path_buf(), f as u32)),
        None => return Err(shape("no `format` field".into())),
    }
    serde_json::from_value(v).map_err(|e| shape(e.to_string()))
}

/// This machine's name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The shared-object names in the dynamic loader's cache (`ldconfig -p`: lines
/// `\tlibnuma.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnuma.so.1`), sorted and without
/// repeats; `None` when `ldconfig` cannot be run.
pub fn system_libraries() -> Option<Vec<String>> {
    let ldconfig = ["/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"]
        .into_iter()
        .find(|p| !p.starts_with('/') || Path::new(p).exists())?;
    let out = Cmd::new(ldconfig)
        .arg("-p")
        .capture(b"", Duration::from_secs(20))
        .ok()?;
    if !out.success {
        return None;
    }
    Some(parse_ldconfig(&out.stdout))
}

fn parse_ldconfig(text: &str) -> Vec<String> {
    let mut libs: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with(char::is_whitespace) && l.contains("=>"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldconfig_lines_give_library_names() {
        let text = "1234 libs found in cache `/etc/ld.so.cache'\n\tlibnuma.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnuma.so.1\n\tlibm.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libm.so.6\n\tlibm.so.6 (libc6) => /lib32/libm.so.6\nCache generated by: ldconfig (GNU libc) stable release version 2.36\n";
        assert_eq!(parse_ldconfig(text), vec!["libm.so.6", "libnuma.so.1"]);
    }
}
