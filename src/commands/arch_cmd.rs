//! `kiln arch FILE...`: the SASS and PTX inside CUDA binaries (and inside the CUDA binaries of
//! a wheel, read from the zip without unpacking it), and whether they run on --arch. It reads
//! files only: no recipes, no interpreter, no probe.

use super::{CmdResult, Failure, exit};
use crate::cli::ArchArgs;
use crate::fatbin;
use crate::probe::binaries::runs_on;
use crate::probe::machine::lenient_semver;
use crate::report::{self, arch::ArchFile, arch::ArchFiles};
use crate::settings::Settings;

pub fn run(settings: &Settings, a: &ArchArgs) -> CmdResult {
    let targets = settings.archs.clone().unwrap_or_default();
    let driver_cuda = match &a.driver_cuda {
        Some(v) => Some(lenient_semver(v).ok_or_else(|| Failure::Usage(format!("`{v}` is not a CUDA version")))?),
        None if !targets.is_empty() => {
            let mut m = crate::probe::machine::probe();
            crate::resolve::driver_table::complete(&mut m).map_err(|e| Failure::Usage(e.to_string()))?;
            m.driver_cuda.map(|d| d.value)
        }
        None => None,
    };
    let mut files = Vec::new();
    let mut failed = false;
    let mut add = |report: fatbin::FileReport| {
        let mut ptx_isa: Vec<(String, String)> = Vec::new();
        for p in report.images().filter_map(|i| i.ptx_isa().map(|v| (i.name(), v))) {
            if !ptx_isa.contains(&p) {
                ptx_isa.push(p);
            }
        }
        let runs_on = targets
            .iter()
            .map(|t| runs_on(&report, *t, driver_cuda.as_ref()))
            .collect();
        files.push(ArchFile {
            report,
            ptx_isa,
            runs_on,
        });
    };
    for path in &a.files {
        // A wheel is read without unpacking it: each CUDA binary inside, as `WHEEL:MEMBER`.
        if path.extension().is_some_and(|e| e == "whl") && path.is_file() {
            match crate::probe::wheel::read(path) {
                Ok(facts) => {
                    for (member, mut report) in facts.cuda {
                        report.path = format!("{}:{member}", path.display());
                        add(report);
                    }
                    for why in &facts.unreadable {
                        failed = true;
                        report::error(&format!("{}: {why}", path.display()));
                    }
                }
                Err(e) => {
                    failed = true;
                    report::error(&e);
                }
            }
            continue;
        }
        match fatbin::read_file(path) {
            Ok(report) => add(report),
            Err(e) => {
                failed = true;
                report::error(&e.to_string());
            }
        }
    }
    if settings.json {
        report::json_doc(&ArchFiles { files: &files });
    } else {
        report::arch::human(&files);
    }
    let unusable = files.iter().any(|f| f.runs_on.iter().any(|r| !r.usable));
    Ok(exit(!failed && !unusable))
}
