//! The embedded recipes' build facts, as the plan uses them (no build runs): flash-attn takes a
//! torch it can compile against (its recipe's bound, with the reason), a request that cannot fit
//! is reported as a conflict with its ways out, and vLLM's plan lists every build input its
//! recipe declares, which `--offline` with an empty cache names one by one.

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};

use crate::common::{World, kiln_bare, stdout_json, step, text};

fn recipe(name: &str) -> serde_json::Value {
    let out = kiln_bare().args(["recipes", name, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    stdout_json(&out)
}

/// `kiln plan` in the world's fresh venv with a CUDA 13.0 toolkit and a g++ 13 (stand-ins that
/// only answer for their version): what a user with a 12.0 GPU's stack would see.
fn plan(w: &World, args: &[&str]) -> std::process::Output {
    let gxx = w.dir.path().join("g++");
    std::fs::write(&gxx, "#!/bin/sh\necho 'g++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0'\n").unwrap();
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&gxx)
        .status()
        .unwrap();
    let mut c = kiln_bare();
    c.arg("--python")
        .arg(&w.python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .env("KILN_CUDA_VERSION", "13.0")
        .env("CXX", &gxx)
        // About source builds (their inputs, the torch they compile against): the wheels some
        // recipes offer are judged in prebuilt.rs and sglang.rs, not fetched here.
        .env("KILN_NO_PREBUILT", "1")
        .args(args);
    c.output().unwrap()
}

#[test]
fn flash_attn_gets_a_torch_it_compiles_against_and_a_request_that_cannot_fit_is_explained() {
    // The recipe's bound, with its reason, and the newest torch the torch recipe offers inside it.
    let fa = recipe("flash-attn");
    let dep = fa["depends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "torch")
        .unwrap();
    let bound = VersionSpecifiers::from_str(dep["version"].as_str().unwrap()).unwrap();
    assert!(!bound.contains(&Version::from_str("2.14.0").unwrap()), "{dep}");
    assert!(dep["why"].as_str().unwrap().contains("-std=c++17"), "{dep}");
    let offered: Vec<Version> = recipe("torch")["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| Version::from_str(v["version"].as_str().unwrap()).unwrap())
        .collect();
    let fitting = offered
        .iter()
        .filter(|v| bound.contains(v))
        .max()
        .expect("a torch that fits")
        .to_string();

    let w = World::new();
    let out = plan(&w, &["plan", "flash-attn", "--arch", "12.0", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["versions"]["torch"], fitting.as_str(), "{v}");
    assert_eq!(step(&v, "torch")["version"], fitting.as_str());
    assert_eq!(step(&v, "flash-attn")["action"], "build", "{v}");

    // SGLang 0.5.23 pins torch==2.14.1: with flash-attn that cannot fit, and kiln says why and
    // how out, without planning anything.
    let sglang = recipe("sglang");
    let pin = sglang["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["version"] == "0.5.23")
        .and_then(|e| e["depends"].as_array().unwrap().iter().find(|d| d["name"] == "torch"))
        .map(|d| d["version"].as_str().unwrap().to_string())
        .unwrap();
    let out = plan(
        &w,
        &["plan", "flash-attn", "sglang==0.5.23", "--arch", "12.0", "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let c = stdout_json(&out)["conflict"].clone();
    let because: Vec<&str> = c["because"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(
        because
            .iter()
            .any(|b| b.contains("flash-attn") && b.contains(dep["version"].as_str().unwrap())),
        "{c}"
    );
    assert!(
        because.iter().any(|b| b.contains("sglang 0.5.23") && b.contains(&pin)),
        "{c}"
    );
    assert!(!c["ways_out"].as_array().unwrap().is_empty(), "{c}");

    // Unpinned, the two fit only with an SGLang below 0.5.23, or not at all: either way the
    // torch bound is what decides, and the output says so.
    let out = plan(&w, &["plan", "flash-attn", "sglang", "--arch", "12.0", "--json"]);
    let v = stdout_json(&out);
    let said = v.to_string();
    assert!(said.contains(dep["version"].as_str().unwrap()), "{said}");
    if out.status.success() {
        let torch = Version::from_str(v["versions"]["torch"].as_str().unwrap()).unwrap();
        assert!(bound.contains(&torch), "{v}");
        assert_ne!(v["versions"]["sglang"], "0.5.23", "{v}");
    }
}

#[test]
fn the_vllm_plan_lists_every_declared_input_and_offline_names_each_missing_one() {
    let w = World::new();
    let out = plan(&w, &["plan", "vllm", "--arch", "12.0", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let chosen = v["versions"]["vllm"].as_str().unwrap().to_string();
    let declared: Vec<serde_json::Value> = recipe("vllm")["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["version"] == chosen.as_str())
        .map(|e| e["inputs"].as_array().unwrap().clone())
        .unwrap();
    assert!(!declared.is_empty());
    let s = step(&v, "vllm");
    assert_eq!(s["action"], "build", "{s}");
    assert_eq!(s["network"], "denied");
    let planned = s["inputs"].as_array().unwrap();
    assert_eq!(planned.len(), declared.len(), "every input is needed for 12.0: {s}");
    for (p, d) in planned.iter().zip(&declared) {
        assert_eq!(p["name"], d["name"]);
        // The pinned identity: a commit, else (UNVERIFIED pins) the upstream tag.
        assert!(p["rev"].is_string() || p["tag"].is_string(), "{p}");
        assert_eq!(p["git"], d["git"]);
        assert_eq!(p["rev"], d["rev"]);
        for var in p["env"].as_object().unwrap().keys() {
            let shown = s["env"][var].as_str().unwrap();
            assert!(
                shown.contains(&format!("<input {}>", p["name"].as_str().unwrap())),
                "{var}={shown}"
            );
        }
    }

    let out = plan(&w, &["install", "vllm", "--arch", "12.0", "--offline", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    for d in &declared {
        let name = d["name"].as_str().unwrap();
        assert!(
            all.contains(&format!("build input `{name}`: the git repository")),
            "{name}: {all}"
        );
    }
    assert!(!w.cache.join("work").exists(), "nothing ran");
}
