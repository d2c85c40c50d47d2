//! `install` ends with the verdict `doctor` gives right after, for the same targets and archs:
//! the same status for every component, exit 1 when it is not ok, and never "verified" over a
//! component `doctor` blocks.
//!
//! Ground truth: issue 19, "Install skips the driver rule": with an R570 driver, `kiln install
//! torch --arch 12.0` said "installed and verified", exit 0, and `doctor` right after said
//! `blocked`. The blocked case here is the driver rule on a real CUDA binary: the CUDA fixture's
//! wheel, compiled by NVIDIA's nvcc (PyPI) for sm_90 and sm_120, under an R560 driver, which
//! cannot drive a Blackwell GPU ("Running any NVIDIA CUDA workload on NVIDIA Blackwell requires
//! a compatible driver (R570 or higher)", NVIDIA's Software Migration Guide for Blackwell RTX
//! GPUs, cited in `driver.rs`). Installed before the driver is known, the wheel imports (its
//! import needs no GPU): only the verdict on the environment says it cannot run, and install
//! says the same; not installed yet, the plan refuses it (issue 19: a step whose result would be
//! `blocked` is refused at plan time).

use std::collections::BTreeMap;

use crate::common::{World, cuda, stdout_json, text};
use crate::prebuilt::{fixture_wheel, offer};

/// The status of each component in a `components` list (`doctor --json`, `install --json`).
fn statuses(v: &serde_json::Value) -> BTreeMap<String, String> {
    v["components"]
        .as_array()
        .unwrap_or_else(|| panic!("no components: {v}"))
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn install_ends_with_the_verdict_doctor_gives_right_after() {
    let w = World::new();
    let wheel = fixture_wheel(&w, "90;120", &w.dir.path().join("wheels"));
    let (recipes, _, _) = offer(&w, &wheel, "");
    let kiln = |driver: Option<&str>, args: &[&str]| {
        let mut c = w.kiln_with(&recipes);
        c.env("CUDA_HOME", cuda()).args(args);
        if let Some(d) = driver {
            c.env("KILN_DRIVER_VERSION", d);
        }
        c.output().unwrap()
    };
    let uninstall = || {
        let st = std::process::Command::new(&w.python)
            .args(["-m", "pip", "uninstall", "-y", "-q", "kiln-fixture-cuda"])
            .status()
            .unwrap();
        assert!(st.success());
    };
    let install = ["install", "--json", "--arch", "12.0", "fixture-cuda"];
    let doctor = ["doctor", "--json", "--arch", "12.0", "fixture-cuda"];

    // No driver named: nothing judges it against the GPU; ok, and doctor agrees.
    let out = kiln(None, &install);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["result"], "ok", "{v}");
    let after = stdout_json(&kiln(None, &doctor));
    assert_eq!(statuses(&v), statuses(&after), "install: {v}\ndoctor: {after}");
    assert_eq!(statuses(&v)["fixture-cuda"], "ok");

    // An R560 driver (KILN_DRIVER_VERSION alone: NVIDIA's table gives it CUDA 12.6): the
    // installed wheel imports, but cannot run on a 12.0 GPU. doctor says `blocked`; install
    // does not reinstall what only a driver can fix: its plan is blocked with doctor's very
    // reasons, exit 1, and nothing is called verified.
    let r560 = Some("560.35.03");
    let after = kiln(r560, &doctor);
    assert_eq!(after.status.code(), Some(1));
    let after = stdout_json(&after);
    let d = crate::common::component(&after, "fixture-cuda");
    assert_eq!(d["status"], "blocked", "{d}");
    assert!(
        d["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "driver-cannot-drive"),
        "{d}"
    );
    let out = kiln(r560, &install);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["result"], "blocked", "{v}");
    let step = crate::common::step(&v["plan"], "fixture-cuda");
    assert_eq!(step["action"], "blocked", "{step}");
    assert_eq!(step["reasons"][0]["kind"], "assessed", "{step}");
    assert_eq!(
        step["reasons"][0]["reasons"], d["reasons"],
        "doctor's reasons: {step}\n{d}"
    );

    // In words: never "verified" over it, and the driver named.
    let out = kiln(r560, &["install", "--arch", "12.0", "fixture-cuda"]);
    assert_eq!(out.status.code(), Some(1));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!stdout.contains("verified"), "{stdout}");
    assert!(
        (stdout.clone() + &stderr).contains("cannot run on a 12.0 GPU with driver 560.35.03 (KILN_DRIVER_VERSION)"),
        "{stdout}{stderr}"
    );

    // Not installed yet: the same driver is refused at plan time, before anything is fetched
    // or installed (issue 19: "a step whose result would be `blocked` is refused at plan time").
    uninstall();
    let out = kiln(r560, &install);
    assert_eq!(out.status.code(), Some(1), "{}{}", text(&out.stdout), text(&out.stderr));
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(
        all.contains("driver-cannot-drive") || all.contains("cannot run on a 12.0 GPU with driver 560.35.03"),
        "{all}"
    );
    assert!(w.py("import kiln_fixture_cuda").is_err(), "nothing installed: {all}");
}

/// Ground truth, the H200 (docs/gpu-proof.md §16): sglang 0.5.11 installed and served, and
/// install's verdict called it not ok because sgl-deep-gemm and sgl-flash-mla, which only sglang
/// 0.5.23 pins, were `missing`; no kiln.lock was written. The verdict judges what the installed
/// version needs; the plan still sees every version's pins.
#[test]
fn the_verdict_judges_what_the_installed_version_needs_not_what_another_version_pins() {
    let w = World::new();
    let (r, p) = (w.dir.path().join("versioned"), w.dir.path().join("versioned-packages"));
    std::fs::create_dir_all(&r).unwrap();
    let recipe = |name: &str, versions: &[(&str, &str)]| {
        let mut s = format!(
            "[package]\nname = \"{name}\"\ndist = \"kiln-{name}\"\naccepts = \">=1\"\n[verify]\nimports = [\"kiln_{name}\"]\n"
        );
        for (v, deps) in versions {
            let path = crate::common::package(&p, &format!("kiln-{name}"), v);
            s += &format!("[[versions]]\nversion = \"{v}\"\npath = \"{path}\"\ndepends = {{ {deps} }}\n");
        }
        std::fs::write(r.join(format!("{name}.toml")), s).unwrap();
    };
    recipe(
        "engine",
        &[("2.0.0", "newkernels = \"*\""), ("1.0.0", "oldkernels = \"*\"")],
    );
    recipe("newkernels", &[("1.0.0", "")]);
    recipe("oldkernels", &[("1.0.0", "")]);
    let kiln = |args: &[&str]| w.kiln_with(&r).args(args).output().unwrap();
    let out = kiln(&["install", "--json", "engine==1.0.0"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["result"], "ok", "{v}");
    let judged = statuses(&v);
    assert_eq!(judged.get("newkernels"), None, "{v}");
    assert_eq!(
        (judged["engine"].as_str(), judged["oldkernels"].as_str()),
        ("ok", "ok"),
        "{v}"
    );
    let out = kiln(&["doctor", "--json", "engine"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert_eq!(statuses(&stdout_json(&out)), judged);
    let lock = w.dir.path().join("kiln.lock");
    let out = kiln(&["lock", "engine", "-o", lock.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(&lock)
            .unwrap()
            .contains("name = \"oldkernels\"")
    );
    // The solver still sees 2.0.0 and what it pins: asked for, the plan moves to it.
    let v = stdout_json(&kiln(&["plan", "--json", "engine==2.0.0"]));
    let engine = crate::common::step(&v, "engine");
    assert_eq!(engine["version"], "2.0.0", "{v}");
    assert_eq!(crate::common::step(&v, "newkernels")["action"], "build", "{v}");
}
