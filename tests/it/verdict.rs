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
