//! Memory per translation unit, measured: what each CUDA compile of a component took on this
//! machine (the gate's `units.jsonl`, [`super::gate`]), kept under
//! `<cache>/memory/<host>/<component>@<archs>.units.json` (the build's `memory_key`: a unit
//! compiled for four archs with `--threads 2` holds two compilers at once where one compiled
//! for one arch holds one): a completed build's units replace what was kept, a failed build's
//! are merged in. The next plan of the component for those archs on this machine schedules by
//! these figures: its compile jobs are as many as the smallest unit allows within the memory
//! the build may use (never more than the build's own figure per job allows), and the gate lets
//! each unit in only while the figures of the units compiling fit that memory, so a build whose
//! units differ (flash-attn's hdim32 and hdim64, one arch or four) runs more of the small ones
//! at once than one figure per job would allow.
//!
//! It deliberately ignores how a unit will differ next time (another version, other flags): a
//! unit's latest measurement is its estimate, and a unit never measured takes the largest
//! figure of its component.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::gate::UnitRun;

/// One component's units for some target archs, as measured on this machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitRecords {
    /// The component and its target archs (`flash-attn@9.0`).
    pub key: String,
    #[serde(default)]
    pub version: Option<String>,
    /// Peak bytes of each unit's compile, by unit (its source, relative to the source tree).
    pub units: BTreeMap<String, u64>,
}

impl UnitRecords {
    /// The smallest and the largest figure.
    pub fn range(&self) -> Option<(u64, u64)> {
        Some((*self.units.values().min()?, *self.units.values().max()?))
    }

    /// `measured per unit on gpu-node-1: 8 units, 1.9 GiB to 3.7 GiB (flash-attn@9.0 2.8.3)`.
    pub fn describe(&self, host: &str) -> String {
        let (lo, hi) = self.range().unwrap_or_default();
        let version = self.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        let n = self.units.len();
        format!(
            "measured per unit on {host}: {n} unit{}, {} to {} ({}{version})",
            if n == 1 { "" } else { "s" },
            super::memory::human(lo),
            super::memory::human(hi),
            self.key
        )
    }
}

fn path(cache: &Path, host: &str, key: &str) -> PathBuf {
    cache.join("memory").join(host).join(format!("{key}.units.json"))
}

/// This machine's figures for the units kept under `key` (a build's `memory_key`), if any.
pub fn load(cache: &Path, key: &str) -> Option<UnitRecords> {
    crate::state::cached_json::<UnitRecords>(&path(cache, &super::memory::host(), key)).filter(|r| !r.units.is_empty())
}

/// Keeps what the gates of one build wrote to `measured` (`units.jsonl`) as this machine's
/// figures under `key`: after a build that `completed`, its units replace the figures kept (a
/// unit renamed or gone leaves with them); after one that failed, each unit that compiled takes
/// its new figure beside the others. Nothing measured (every compile behind sccache) keeps the
/// figures as they were. Two kilns keeping the same key take turns. Returns how many units were
/// kept.
pub fn keep(
    cache: &Path,
    key: &str,
    version: Option<&str>,
    measured: &Path,
    completed: bool,
) -> std::io::Result<usize> {
    let Ok(text) = std::fs::read_to_string(measured) else {
        return Ok(0);
    };
    let runs: Vec<UnitRun> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<UnitRun>(l).ok())
        .filter(|r| r.ok && r.peak > 0)
        .collect();
    if runs.is_empty() {
        return Ok(0);
    }
    let p = path(cache, &super::memory::host(), key);
    std::fs::create_dir_all(p.parent().expect("a figures file has a directory"))?;
    let lock = std::fs::File::create(p.with_extension("lock"))?;
    lock.lock()?;
    let mut records = match completed {
        true => None,
        false => load(cache, key),
    }
    .unwrap_or_else(|| UnitRecords {
        key: key.to_string(),
        ..UnitRecords::default()
    });
    records.version = version.map(str::to_string);
    for r in &runs {
        records.units.insert(r.unit.clone(), r.peak);
    }
    let bytes = serde_json::to_vec_pretty(&records).map_err(std::io::Error::other)?;
    crate::store::atomic::write(&p, &bytes, crate::store::atomic::Sync::Cache)?;
    Ok(runs.len())
}

/// The gate's view of the records: the figure of each unit, and the largest as the estimate of
/// a unit never measured.
pub fn gate_figures(records: Option<&UnitRecords>) -> (BTreeMap<String, u64>, Option<u64>) {
    match records {
        Some(r) => (r.units.clone(), r.range().map(|(_, hi)| hi)),
        None => (BTreeMap::new(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_gates_measured_is_kept_per_unit_and_a_completed_build_is_the_whole_story() {
        let cache = tempfile::tempdir().unwrap();
        let measured = cache.path().join("units.jsonl");
        let line = |unit: &str, peak: u64, ok: bool| {
            let run = UnitRun {
                unit: unit.into(),
                peak,
                seconds: 1.0,
                ok,
                start: 0.0,
            };
            serde_json::to_string(&run).unwrap()
        };
        let lines = [
            line("csrc/hdim64.cu", 2 << 30, true),
            line("csrc/hdim256.cu", 4 << 30, true),
            line("csrc/broken.cu", 9 << 30, false),
            "torn".into(),
        ];
        std::fs::write(&measured, lines.join("\n")).unwrap();
        assert_eq!(
            keep(cache.path(), "flash-attn@9.0", Some("2.8.3"), &measured, true).unwrap(),
            2
        );
        let r = load(cache.path(), "flash-attn@9.0").unwrap();
        assert_eq!(
            load(cache.path(), "flash-attn@12.0"),
            None,
            "other archs, other figures"
        );
        assert_eq!(r.range(), Some((2 << 30, 4 << 30)));
        assert_eq!(
            r.describe("node-1"),
            "measured per unit on node-1: 2 units, 2.0 GiB to 4.0 GiB (flash-attn@9.0 2.8.3)"
        );
        // A later build that failed measured hdim64 again: its new figure replaces the old,
        // hdim256 stays.
        std::fs::write(&measured, line("csrc/hdim64.cu", 1 << 30, true)).unwrap();
        keep(cache.path(), "flash-attn@9.0", Some("2.8.4"), &measured, false).unwrap();
        let (units, unmeasured) = gate_figures(load(cache.path(), "flash-attn@9.0").as_ref());
        assert_eq!(units["csrc/hdim64.cu"], 1 << 30);
        assert_eq!(unmeasured, Some(4 << 30));
        // One that completed is the whole story: hdim256 (renamed, say) is gone.
        keep(cache.path(), "flash-attn@9.0", Some("2.8.4"), &measured, true).unwrap();
        let r = load(cache.path(), "flash-attn@9.0").unwrap();
        assert_eq!(r.units.keys().collect::<Vec<_>>(), ["csrc/hdim64.cu"]);
        let none = cache.path().join("none.jsonl");
        assert_eq!(keep(cache.path(), "other", None, &none, true).unwrap(), 0);
        assert_eq!(load(cache.path(), "other"), None);
    }
}
