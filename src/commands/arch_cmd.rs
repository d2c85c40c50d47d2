//! `kiln arch FILE...`: the SASS and PTX inside CUDA binaries, and whether they run on --arch.
//! It reads files only: no recipes, no interpreter, no probe.

use std::process::ExitCode;

use serde::Serialize;

use super::{CmdResult, Failure};
use crate::arch;
use crate::arch::run::{RunsOn, runs_on};
use crate::cli::{ArchArgs, Global};
use crate::fatbin::{self, FileReport};
use crate::probe::machine::lenient_semver;
use crate::report;

/// One file's listing, and the verdict for each target arch.
#[derive(Debug, Serialize)]
pub struct ArchFile {
    #[serde(flatten)]
    pub report: FileReport,
    /// PTX targets with their ISA version.
    pub ptx_isa: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs_on: Vec<RunsOn>,
}

pub fn run(g: &Global, a: &ArchArgs) -> CmdResult {
    let targets = match &g.arch {
        Some(s) => arch::parse_list(s).map_err(|e| Failure::Usage(e.to_string()))?,
        None => Vec::new(),
    };
    let driver_cuda = match &a.driver_cuda {
        Some(v) => Some(lenient_semver(v).ok_or_else(|| Failure::Usage(format!("`{v}` is not a CUDA version")))?),
        None if !targets.is_empty() => crate::probe::machine::probe().driver_cuda.map(|d| d.value),
        None => None,
    };
    let mut files = Vec::new();
    let mut failed = false;
    for path in &a.files {
        match fatbin::read_file(path) {
            Ok(report) => {
                let ptx_isa = report.images().filter_map(|i| i.ptx_isa().map(|v| (i.name(), v))).fold(
                    Vec::new(),
                    |mut acc: Vec<(String, String)>, p| {
                        if !acc.contains(&p) {
                            acc.push(p);
                        }
                        acc
                    },
                );
                let runs = targets
                    .iter()
                    .map(|t| runs_on(&report, *t, driver_cuda.as_ref()))
                    .collect();
                files.push(ArchFile {
                    report,
                    ptx_isa,
                    runs_on: runs,
                });
            }
            Err(e) => {
                failed = true;
                report::error(&e.to_string());
            }
        }
    }
    if g.json {
        report::json(&serde_json::json!({ "files": files }));
    } else {
        report::arch_files(&files);
    }
    let unusable = files.iter().any(|f| f.runs_on.iter().any(|r| !r.usable));
    Ok(if failed || unusable {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
