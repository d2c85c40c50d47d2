//! The CUDA binaries a distribution installed: every shared object its `RECORD` lists, with the
//! SASS and PTX their fatbins hold (read by [`crate::fatbin`], headers only).
//!
//! It deliberately ignores files outside the RECORD (caches a package writes at run time) and
//! does not judge the archs: `resolve::status` does, with the run rules.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fatbin::{self, FileReport};
use crate::probe::python::Dist;

/// The shared objects of one distribution that hold CUDA code, and the ones that could not be read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Binaries {
    /// Files with at least one loadable kernel image.
    pub cuda: Vec<FileReport>,
    /// Shared objects without CUDA code.
    pub plain: usize,
    /// Files that could not be read, with the reason.
    pub unreadable: Vec<String>,
}

/// Reads every `.so` listed in the distribution's RECORD.
pub fn scan(dist: &Dist) -> Binaries {
    let mut out = Binaries::default();
    let (Some(info), Some(loc)) = (&dist.dist_info, &dist.location) else {
        return out;
    };
    let Ok(record) = std::fs::read_to_string(Path::new(info).join("RECORD")) else {
        return out;
    };
    for line in record.lines() {
        let Some(rel) = line.split(',').next() else { continue };
        let is_so = rel.ends_with(".so") || rel.contains(".so.");
        if !is_so {
            continue;
        }
        let path = Path::new(loc).join(rel.trim_matches('"'));
        if !path.is_file() {
            continue;
        }
        match fatbin::read_file(&path) {
            Ok(r) if r.images().next().is_some() => out.cuda.push(r),
            Ok(_) => out.plain += 1,
            Err(e) => out.unreadable.push(e.to_string()),
        }
    }
    out
}
