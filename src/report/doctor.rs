//! `kiln doctor`: the machine, a status per component with evidence, backend verdicts and the
//! CUDA binaries read. [`Doctor`] is the document; [`human`] draws it for a person. It
//! deliberately ignores how the facts were found.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::gib;
use crate::arch::Arch;
use crate::probe::MachineFacts;
use crate::probe::binaries::Binaries;
use crate::probe::cache::CacheUse;
use crate::probe::machine::{Gpu, Sourced, Toolkit};
use crate::probe::python::TorchFacts;
use crate::resolve::serving::summary::BackendSummary;
use crate::resolve::{Assessment, Status};

/// What `kiln doctor --json` prints (through [`super::json_doc`]: keys in name order).
#[derive(Debug, Serialize)]
pub struct Doctor<'a> {
    pub machine: Machine<'a>,
    pub components: &'a [Assessment],
    pub torch: Option<&'a TorchFacts>,
    #[serde(serialize_with = "backends_json")]
    pub backends: Vec<BackendSummary>,
    pub binaries: Vec<DistBinaries<'a>>,
    /// Installed distributions no recipe manages that hold CUDA binaries, judged by them.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub unmanaged: &'a [crate::resolve::unmanaged::Unmanaged],
    /// JIT proofs by component: the kernels compiled and the images read back from them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub jit: &'a BTreeMap<String, crate::probe::jit::JitOutcome>,
    /// What a serving process gets from kiln: run-time defaults and precompiled modules.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runtime: Vec<crate::session::runtime::RuntimeReport>,
    /// This node's facts, for `kiln plan --for` / `kiln bundle --for` elsewhere (`--json` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<crate::probe::node::NodeFacts>,
}

/// The interpreter inspected.
#[derive(Debug, Serialize)]
pub struct Interpreter<'a> {
    pub path: &'a Path,
    pub chosen_by: &'a str,
    pub version: &'a str,
    pub prefix: &'a str,
}

/// The machine section: the interpreter, the machine's facts, the target archs and where they
/// came from, the recipes and whether the probe cache answered.
#[derive(Debug, Serialize)]
pub struct Machine<'a> {
    pub python: Interpreter<'a>,
    pub gpus: &'a [Gpu],
    pub gpu_source: &'a str,
    pub driver: Option<&'a Sourced<String>>,
    pub driver_cuda: Option<&'a Sourced<semver::Version>>,
    pub host_compiler: Option<&'a Sourced<String>>,
    pub cuda_toolkit: Option<&'a Toolkit>,
    pub cuda_searched: &'a [String],
    pub cpus: usize,
    pub memory_available: Option<u64>,
    pub target_archs: &'a [Arch],
    pub target_archs_from: &'a str,
    pub recipes: &'a str,
    pub probe_cache: CacheUse,
    /// Where each part of the Python facts came from (`probe::cache::Sources`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_sources: Option<&'a crate::probe::cache::Sources>,
}

impl<'a> Machine<'a> {
    /// The section for `facts`, with the rest given.
    pub fn new(
        python: Interpreter<'a>,
        facts: &'a MachineFacts,
        targets: (&'a [Arch], &'a str),
        recipes: &'a str,
        probe_cache: CacheUse,
    ) -> Machine<'a> {
        Machine {
            python,
            gpus: &facts.gpus,
            gpu_source: &facts.gpu_source,
            driver: facts.driver.as_ref(),
            driver_cuda: facts.driver_cuda.as_ref(),
            host_compiler: facts.host_compiler.as_ref(),
            cuda_toolkit: facts.cuda_toolkit.as_ref(),
            cuda_searched: &facts.cuda_searched,
            cpus: facts.cpus,
            memory_available: facts.memory_available,
            target_archs: targets.0,
            target_archs_from: targets.1,
            recipes,
            probe_cache,
            probe_sources: None,
        }
    }
}

/// The CUDA binaries of one distribution.
#[derive(Debug, Serialize)]
pub struct DistBinaries<'a> {
    pub dist: &'a str,
    pub files: Vec<BinaryFile<'a>>,
    pub without_cuda: usize,
    pub unreadable: &'a [String],
}

/// One file with CUDA code: its SASS and PTX targets.
#[derive(Debug, Serialize)]
pub struct BinaryFile<'a> {
    pub path: &'a str,
    pub sass: &'a [String],
    pub ptx: &'a [String],
}

/// The binaries section, by distribution.
pub fn binaries(by_dist: &BTreeMap<String, Binaries>) -> Vec<DistBinaries<'_>> {
    by_dist
        .iter()
        .map(|(dist, b)| DistBinaries {
            dist,
            files: b
                .cuda
                .iter()
                .map(|f| BinaryFile {
                    path: &f.path,
                    sass: &f.sass,
                    ptx: &f.ptx,
                })
                .collect(),
            without_cuda: b.plain,
            unreadable: &b.unreadable,
        })
        .collect()
}

/// The machine, for a person.
pub fn machine_human(m: &Machine) {
    println!("machine");
    println!(
        "  python   {} ({}; Python {})",
        m.python.path.display(),
        m.python.chosen_by,
        m.python.version
    );
    if m.gpus.is_empty() {
        println!("  gpu      {}", m.gpu_source);
    } else {
        for g in m.gpus {
            println!("  gpu      {} (compute {}) from {}", g.name, g.arch, m.gpu_source);
        }
    }
    match m.driver {
        Some(d) => println!("  driver   {} from {}", d.value, d.source),
        None => println!("  driver   none found"),
    }
    if let Some(c) = m.driver_cuda {
        println!(
            "  driver   supports CUDA {}.{} (from {})",
            c.value.major, c.value.minor, c.source
        );
    }
    match m.cuda_toolkit {
        Some(t) => println!("  cuda     {} from {}", t.version, t.source),
        None => println!("  cuda     none found ({})", m.cuda_searched.join("; ")),
    }
    if let Some(c) = m.host_compiler {
        println!("  c++      {} ({})", c.value, c.source);
    }
    let mem = m.memory_available.map(gib).unwrap_or_else(|| "unknown".into());
    println!("  cpus     {} (memory available {mem})", m.cpus);
    if m.target_archs.is_empty() {
        println!("  target   none: no GPU found; pass --arch (e.g. --arch 12.0)");
    } else {
        let list: Vec<String> = m.target_archs.iter().map(|a| a.to_string()).collect();
        println!("  target   {} from {}", list.join(", "), m.target_archs_from);
    }
}

/// The whole report, for a person.
pub fn human(d: &Doctor) {
    machine_human(&d.machine);
    println!();
    println!("components");
    let w = d.components.iter().map(|a| a.name.len()).max().unwrap_or(4).max(4);
    for a in d.components {
        let version = a.version.as_deref().unwrap_or("-");
        println!(
            "  {:w$}  {:11}  {:14}  {}",
            a.name,
            a.status.as_str(),
            version,
            super::reason::evidence(&a.reasons)
        );
        for f in &a.features {
            println!(
                "  {:w$}  {:11}  {:14}  {}",
                format!("  [{}]", f.name),
                f.status.as_str(),
                "",
                super::reason::evidence(&f.reasons)
            );
        }
    }
    unmanaged_human(d.unmanaged);
    super::serving::doctor_section(&d.backends);
    runtime_human(&d.runtime);
    let bad = d.components.iter().filter(|a| a.status != Status::Ok).count();
    println!();
    let lacking = d.unmanaged.iter().filter(|u| u.status != Status::Ok).count();
    if lacking > 0 {
        println!(
            "{lacking} distribution{} no recipe manages lack{} a kernel image for the target archs",
            if lacking == 1 { "" } else { "s" },
            if lacking == 1 { "s" } else { "" }
        );
    }
    if bad == 0 {
        println!("all {} components ok", d.components.len());
    } else {
        println!(
            "{bad} of {} components not ok; `kiln plan` shows what `kiln install` would do",
            d.components.len()
        );
    }
}

/// The distributions no recipe manages that hold CUDA binaries, each with its verdict.
fn unmanaged_human(unmanaged: &[crate::resolve::unmanaged::Unmanaged]) {
    if unmanaged.is_empty() {
        return;
    }
    println!();
    println!("not managed by kiln (CUDA binaries read for the target archs)");
    let w = unmanaged.iter().map(|u| u.dist.len()).max().unwrap_or(4).max(4);
    for u in unmanaged {
        println!(
            "  {:w$}  {:11}  {:14}  {}",
            u.dist,
            u.status.as_str(),
            u.version,
            super::reason::evidence(&u.reasons)
        );
    }
}

/// The backends with their reasons rendered beside the typed fields.
fn backends_json<S: serde::Serializer>(b: &[BackendSummary], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    #[derive(Serialize)]
    struct Row<'a> {
        #[serde(flatten)]
        summary: &'a BackendSummary,
        works_text: &'static str,
        #[serde(rename = "reasons")]
        rendered: Vec<super::serving::Rendered<'a>>,
    }
    let mut seq = s.serialize_seq(Some(b.len()))?;
    for x in b {
        seq.serialize_element(&Row {
            summary: x,
            works_text: super::serving::word(x.works),
            rendered: super::serving::rendered(&x.reasons),
        })?;
    }
    seq.end()
}

/// The run-time section: the defaults file and the precompiled modules of each component.
fn runtime_human(reports: &[crate::session::runtime::RuntimeReport]) {
    if reports.is_empty() {
        return;
    }
    println!();
    println!("run time");
    for r in reports {
        let set =
            |e: &BTreeMap<String, String>| e.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        let file = r.file.path.display();
        if !r.expected.is_empty() || r.file.present {
            let state = match (&r.file.env, r.matches) {
                (_, true) => format!("{file} sets {}", set(&r.expected)),
                (Some(e), false) => format!(
                    "{file} sets {}; the recipe says {} for these archs",
                    set(e),
                    set(&r.expected)
                ),
                (None, _) if r.file.present => format!("{file} is not a file kiln wrote"),
                (None, _) => format!(
                    "no {file} (`kiln install {} --aot` writes it); the recipe says {}",
                    r.component,
                    set(&r.expected)
                ),
            };
            println!("  {}  {state}", r.component);
        }
        if let Some(why) = &r.cannot_render {
            println!("  {}  {why}", r.component);
        }
        for m in &r.aot {
            let what = if m.present {
                format!("[{}]", m.sass.join(" "))
            } else {
                "MISSING".into()
            };
            println!(
                "  {}  precompiled {} {what} {}",
                r.component,
                m.module,
                m.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_has_every_key_of_the_doctor_output_in_name_order() {
        let facts = MachineFacts {
            gpus: vec![Gpu {
                name: "NVIDIA H200".into(),
                arch: Arch { major: 9, minor: 0 },
            }],
            gpu_source: "nvidia-smi".into(),
            driver: None,
            driver_cuda: None,
            host_compiler: None,
            cuda_toolkit: None,
            cuda_searched: Vec::new(),
            cpus: 2,
            memory_available: None,
        };
        let archs = [Arch { major: 9, minor: 0 }];
        let by_dist = BTreeMap::from([("torch".to_string(), Binaries::default())]);
        let python = Interpreter {
            path: Path::new("/venv/bin/python"),
            chosen_by: "--python",
            version: "3.12.3",
            prefix: "/venv",
        };
        let doc = Doctor {
            machine: Machine::new(python, &facts, (&archs, "--arch"), "embedded", CacheUse::Hit),
            components: &[],
            torch: None,
            backends: Vec::new(),
            binaries: binaries(&by_dist),
            unmanaged: &[],
            jit: &BTreeMap::new(),
            runtime: Vec::new(),
            node: None,
        };
        let want = serde_json::json!({
            "machine": {
                "python": {"path": "/venv/bin/python", "chosen_by": "--python", "version": "3.12.3", "prefix": "/venv"},
                "gpus": [{"name": "NVIDIA H200", "arch": "9.0"}],
                "gpu_source": "nvidia-smi",
                "driver": null,
                "driver_cuda": null,
                "host_compiler": null,
                "cuda_toolkit": null,
                "cuda_searched": [],
                "cpus": 2,
                "memory_available": null,
                "target_archs": ["9.0"],
                "target_archs_from": "--arch",
                "recipes": "embedded",
                "probe_cache": "hit",
            },
            "components": [],
            "torch": null,
            "backends": [],
            "binaries": [{"dist": "torch", "files": [], "without_cuda": 0, "unreadable": []}],
        });
        let got = serde_json::to_value(&doc).unwrap();
        assert_eq!(got, want);
        // Printed through a Value, keys come out in name order at every level.
        let text = serde_json::to_string(&got).unwrap();
        assert!(
            text.starts_with(r#"{"backends":[],"binaries":[{"dist":"torch""#),
            "{text}"
        );
    }
}
