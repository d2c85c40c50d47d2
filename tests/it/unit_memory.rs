//! Memory per translation unit: kiln's gate in front of every CUDA compile of a real build
//! (fixture-cuda's three kernels, compiled side by side with real nvcc 13.0.88 from PyPI, no
//! GPU) measures each unit, the next plan on the machine sizes the build by those figures, and
//! the gate keeps the compiles within the memory the build was given.

use std::path::{Path, PathBuf};

use crate::common::{World, cuda13_0, kiln_bare, stdout_json, step, text, venv};

fn kiln(w: &World, python: &Path, args: &[&str]) -> std::process::Output {
    kiln_bare()
        .arg("--recipes")
        .arg(w.dir.path().join("fixtures/cuda-recipes"))
        .arg("--python")
        .arg(python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .arg("--no-progress")
        .env("CUDA_HOME", cuda13_0())
        .args(args)
        .output()
        .unwrap()
}

/// This machine's figures per unit of fixture-cuda, from kiln's cache.
fn units(w: &World) -> serde_json::Map<String, serde_json::Value> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let p = w
        .cache
        .join("memory")
        .join(host.trim())
        .join("fixture-cuda@12.0.units.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap();
    v["units"].as_object().unwrap().clone()
}

fn wheel_log(out: &std::process::Output) -> String {
    let logs = PathBuf::from(stdout_json(out)["logs"].as_str().unwrap());
    std::fs::read_to_string(logs.join("fixture-cuda.wheel.log"))
        .unwrap_or_else(|e| panic!("no wheel log under {}: {e}", logs.display()))
}

#[test]
fn units_measured_in_one_build_size_the_next_and_the_gate_keeps_compiles_within_the_limit() {
    let w = World::new();
    // A limit that is no size, or nothing, is refused before anything runs, saying what would do.
    for (bad, says) in [
        ("12GX", "expected a size such as `16GiB`"),
        ("0", "a memory limit of 0 leaves builds nothing"),
    ] {
        let out = kiln(&w, &w.python, &["plan", "--memory-limit", bad]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
    }
    // First build, two jobs: the three units go through the gate and are measured.
    let out = kiln(&w, &w.python, &["install", "--json", "--arch", "12.0", "--jobs", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let first = units(&w);
    let names: Vec<&str> = first.keys().map(String::as_str).collect();
    assert_eq!(names, ["kernels/axpy.cu", "kernels/relu.cu", "kernels/scale.cu"]);
    let figures: Vec<u64> = first.values().map(|v| v.as_u64().unwrap()).collect();
    // nvcc, cudafe++, cicc and ptxas: tens of MiB at least, never the whole machine.
    assert!(figures.iter().all(|&b| b > 20 << 20 && b < 8 << 30), "{first:?}");
    let (small, large) = (*figures.iter().min().unwrap(), *figures.iter().max().unwrap());

    // The next plan on this machine (a fresh venv: fixture-cuda is to be built again) is sized
    // by those figures: as many jobs as the smallest unit allows in the memory given, the
    // largest as the figure per job, the memory as the gate's limit.
    let python2 = venv(&w.dir.path().join("venv2"));
    let limit = small * 3;
    let plan = stdout_json(&kiln(
        &w,
        &python2,
        &["plan", "--json", "--arch", "12.0", "--memory-limit", &limit.to_string()],
    ));
    let s = step(&plan, "fixture-cuda");
    assert_eq!(s["jobs"], 2, "{s}");
    assert_eq!(s["memory_per_job"], large, "{s}");
    assert_eq!(s["memory_limit"], limit.min(2 * large), "{s}");
    let from = s["memory_per_job_from"].as_str().unwrap();
    assert!(
        from.starts_with("measured per unit on ") && from.contains(": 3 units, "),
        "{s}"
    );
    let nvcc = cuda13_0().join("bin/nvcc");
    assert_eq!(
        s["env"]["PYTORCH_NVCC"],
        format!("kiln gate -- {}", nvcc.display()),
        "{s}"
    );
    assert_eq!(s["env"]["CMAKE_CUDA_COMPILER_LAUNCHER"], "kiln;gate;--", "{s}");
    let shown = text(
        &kiln(
            &w,
            &python2,
            &["plan", "--arch", "12.0", "--memory-limit", &limit.to_string()],
        )
        .stdout,
    );
    assert!(shown.contains("memory for its CUDA compiles together: "), "{shown}");

    // Two jobs, but memory for one unit at a time: the gate holds each second unit back. (A
    // change to the recipe's build table: a new wheel key, so the wheel cache has none.)
    w.edit(
        "cuda-recipes/fixture-cuda.toml",
        "CUDA_HOME = \"{cuda_home}\" }",
        "CUDA_HOME = \"{cuda_home}\", FIXTURE_NOTE = \"again\" }",
    );
    let one = large.to_string();
    let out = kiln(
        &w,
        &python2,
        &[
            "install",
            "--json",
            "--arch",
            "12.0",
            "--jobs",
            "2",
            "--memory-limit",
            &one,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log = wheel_log(&out);
    assert!(
        log.contains("kiln gate: kernels/") && log.contains(" waits for "),
        "{log}"
    );
    eprintln!(
        "figures {first:?}; {}",
        log.lines()
            .filter(|l| l.starts_with("kiln gate"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    // Every unit was measured again, and no two compiled at once (each alone fills the limit).
    assert_eq!(units(&w).len(), 3);
    let logs = PathBuf::from(stdout_json(&out)["logs"].as_str().unwrap());
    let runs: Vec<(f64, f64)> = std::fs::read_to_string(logs.join("fixture-cuda.wheel.units.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            (
                v["start"].as_f64().unwrap(),
                v["start"].as_f64().unwrap() + v["seconds"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    // The step's progress said so while it built.
    let events = std::fs::read_to_string(logs.join("events.jsonl")).unwrap();
    assert!(events.contains("2 jobs; the memory gate held back 1 unit"), "{events}");
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            assert!(a.1 <= b.0 + 0.05 || b.1 <= a.0 + 0.05, "two units at once: {runs:?}");
        }
    }
    let doctor = stdout_json(&kiln(
        &w,
        &python2,
        &["doctor", "--json", "--arch", "12.0", "fixture-cuda"],
    ));
    assert_eq!(
        crate::common::component(&doctor, "fixture-cuda")["status"],
        "ok",
        "{doctor}"
    );
}
