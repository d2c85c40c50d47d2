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
        // By kind, the first offset and the count: a library can hold thousands (libcufft.so.12
        // has 18,055 entries of kind 0x8 beside its images).
        let mut unknown: std::collections::BTreeMap<u16, (u64, usize)> = std::collections::BTreeMap::new();
        for u in f.report.fatbins.iter().flat_map(|b| &b.unknown) {
            let e = unknown.entry(u.kind).or_insert((u.offset, 0));
            e.1 += 1;
        }
        for (kind, (first, n)) in unknown {
            match n {
                1 => println!("  unknown entry kind {kind:#x} at {first:#x}"),
                _ => println!("  unknown entry kind {kind:#x}: {n} entries, the first at {first:#x}"),
            }
        }
        for r in &f.runs_on {
            println!("  {}  {}", if r.usable { "runs" } else { "NO  " }, r.why);
        }
    }
}
