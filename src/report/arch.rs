//! `kiln arch FILE...`: the SASS and PTX in each file, and whether it runs on each target arch.
//! It deliberately ignores how the images were found (that is `fatbin`) and how they are
//! judged (that is `arch::run`).

use serde::Serialize;

use crate::arch::run::RunsOn;
use crate::fatbin::FileReport;

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

/// What `kiln arch --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
pub struct ArchFiles<'a> {
    pub files: &'a [ArchFile],
}

/// The files, for a person.
pub fn human(files: &[ArchFile]) {
    for f in files {
        println!("{}", f.report.path);
        let none = || "-".to_string();
        println!(
            "  sass  {}",
            if f.report.sass.is_empty() {
                none()
            } else {
                f.report.sass.join(" ")
            }
        );
        let ptx: Vec<String> = f.ptx_isa.iter().map(|(n, v)| format!("{n} (ISA {v})")).collect();
        println!("  ptx   {}", if ptx.is_empty() { none() } else { ptx.join(" ") });
        let images: usize = f.report.fatbins.iter().map(|b| b.images.len()).sum();
        println!(
            "  {} fatbin{}, {images} image{}",
            f.report.fatbins.len(),
            if f.report.fatbins.len() == 1 { "" } else { "s" },
            if images == 1 { "" } else { "s" }
        );
        let rdc = f
            .report
            .fatbins
            .iter()
            .filter(|b| !b.loadable())
            .map(|b| b.images.len())
            .sum::<usize>();
        if f.report.relocatable && rdc > 0 {
            println!("  relocatable object: its {rdc} -rdc image(s) load once device-linked into a binary");
        } else if rdc > 0 {
            println!("  {rdc} relocatable -rdc image(s) left beside the linked ones: never loaded, not counted");
        }
        for b in &f.report.fatbins {
            for u in &b.unknown {
                println!("  unknown entry kind {:#x} at {:#x}", u.kind, u.offset);
            }
        }
        for r in &f.runs_on {
            println!("  {}  {}", if r.usable { "runs" } else { "NO  " }, r.why);
        }
    }
}
