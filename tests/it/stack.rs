//! The embedded recipes against real environments: the SM120 plan and a real PyPI package that
//! is installed but cannot be imported.

use std::process::Command as StdCommand;

use crate::common::{World, kiln_bare, stdout_json, step, text};

fn plan_json(w: &World, cuda: Option<&str>) -> serde_json::Value {
    let mut c = kiln_bare();
    // About order and build rules, not wheels: the 373 MB sglang-kernel wheel the recipe offers
    // is not fetched (the wheel path: tests/it/sglang.rs and the trial in the recipe).
    c.arg("--python")
        .arg(&w.python)
        .env("KILN_NO_PREBUILT", "1")
        .args(["plan", "sglang", "--arch", "12.0", "--json"]);
    if let Some(v) = cuda {
        c.env("KILN_CUDA_VERSION", v);
    }
    let out = c.output().unwrap();
    stdout_json(&out)
}

fn steps(v: &serde_json::Value) -> Vec<(String, String)> {
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().into(), s["action"].as_str().unwrap().into()))
        .collect()
}

#[test]
fn sglang_plan_for_sm120_is_in_dependency_order_with_reasons() {
    let w = World::new();
    // With a CUDA 13.0 toolkit (named by the override; nothing else differs).
    let v = plan_json(&w, Some("13.0"));
    let expect: Vec<(String, String)> = [
        ("cuda-toolkit", "keep"),
        ("cutlass-dsl", "install"),
        ("torch", "install"),
        ("flashinfer", "build"),
        ("sglang-kernel", "build"),
        ("sglang", "build"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(steps(&v), expect);
    let fi = &v["steps"][3];
    assert_eq!(fi["features"][0], "cutedsl", "sglang needs flashinfer[cutedsl]");
    // The arch list is read only when kernels JIT-compile, so it is not in the wheel build's
    // env (the JIT proof sets it: tests/it/jit.rs, and arch/mod.rs tests its spelling).
    assert!(fi["env"].get("FLASHINFER_CUDA_ARCH_LIST").is_none(), "{fi}");
    assert_eq!(fi["env"]["FLASHINFER_BUILD_NO_PIP"], "1");
    assert_eq!(fi["env"]["BUILD_NVEP"], "0");
    assert_eq!(
        w.redact(fi["reason"].as_str().unwrap()),
        "missing: flashinfer-python is not installed in [TMP]/venv; 0.7.2, not 0.7.4: sglang 0.5.11 needs flashinfer ==0.6.8.post1; sglang 0.5.23 needs flashinfer ==0.7.2; you asked for sglang"
    );
    // With CUDA 12.8 flashinfer is still built (12.0 is spelled 12.0a for its JIT).
    assert_eq!(plan_json(&w, Some("12.8"))["steps"][3]["action"], "build");

    // Without a toolkit, everything that compiles against it is blocked, with the root cause.
    if which::which("nvcc").is_err() && !std::path::Path::new("/usr/local/cuda/bin/nvcc").exists() {
        let v = plan_json(&w, None);
        let s = &v["steps"];
        assert_eq!(s[0]["action"], "blocked");
        assert!(s[0]["reason"].as_str().unwrap().starts_with("no CUDA toolkit found"));
        assert_eq!(s[3]["action"], "blocked");
        assert!(
            s[3]["reason"]
                .as_str()
                .unwrap()
                .starts_with("needs cuda-toolkit: no CUDA toolkit found")
        );
        assert_eq!(s[5]["reason"], "needs sglang-kernel, which is blocked by cuda-toolkit");
        let human = kiln_bare()
            .arg("--python")
            .arg(&w.python)
            .env("KILN_NO_PREBUILT", "1")
            .args(["plan", "sglang", "--arch", "12.0"])
            .output()
            .unwrap();
        assert_eq!(human.status.code(), Some(1));
        insta::assert_snapshot!("plan_sglang_no_toolkit", w.redact(&text(&human.stdout)));
    }
}

#[test]
fn doctor_lists_all_nine_components_truthfully() {
    let w = World::new();
    let out = kiln_bare()
        .arg("--python")
        .arg(&w.python)
        .args(["doctor", "--arch", "12.0", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = stdout_json(&out);
    let comps = v["components"].as_array().unwrap();
    assert_eq!(comps.len(), 9);
    for c in comps {
        let name = c["name"].as_str().unwrap();
        if name == "cuda-toolkit" {
            continue;
        }
        assert_eq!(c["status"], "missing", "{name}");
        assert!(c["version"].is_null());
    }
    assert_eq!(v["machine"]["target_archs"][0], "12.0");
    assert_eq!(v["machine"]["python"]["chosen_by"], "--python");
}

#[test]
fn installed_but_unimportable_real_package_is_broken_not_ok() {
    let w = World::new();
    // The nvidia-cutlass-dsl meta wheel from PyPI without its -libs-* dependencies: pip lists it,
    // but `import cutlass` cannot work.
    let st = crate::common::pip_install(&w.python)
        .arg("nvidia-cutlass-dsl==4.8.0")
        .status()
        .unwrap();
    assert!(st.success());
    let out = kiln_bare()
        .arg("--python")
        .arg(&w.python)
        .args(["doctor", "cutlass-dsl", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let c = &stdout_json(&out)["components"][0];
    assert_eq!(c["name"], "cutlass-dsl");
    assert_eq!(c["status"], "broken");
    assert_eq!(c["version"], "4.8.0");
    assert_eq!(
        c["evidence"],
        "import cutlass failed: ModuleNotFoundError: No module named 'cutlass'; import cutlass.cute failed: ModuleNotFoundError: No module named 'cutlass'"
    );
}

fn fake_compiler(dir: &std::path::Path, line: &str) -> std::path::PathBuf {
    let p = dir.join(format!("g++-{}", line.len()));
    std::fs::write(&p, format!("#!/bin/sh\necho '{line}'\n")).unwrap();
    StdCommand::new("chmod").arg("755").arg(&p).status().unwrap();
    p
}

#[test]
fn toolkit_and_compiler_rules_say_no_before_building() {
    let w = World::new();
    let plan = |targets: &[&str], arch: &str, cuda: &str, cxx: &std::path::Path| {
        let mut c = kiln_bare();
        c.arg("--python").arg(&w.python).arg("--cache-dir").arg(&w.cache);
        // About build rules, not wheels: no 336 MB vLLM wheel fetched to judge it.
        c.env("KILN_CUDA_VERSION", cuda)
            .env("KILN_NO_PREBUILT", "1")
            .env("CXX", cxx)
            .args(["plan", "--json", "--arch", arch])
            .args(targets);
        stdout_json(&c.output().unwrap())
    };
    let gcc12 = fake_compiler(w.dir.path(), "g++ (Debian 12.2.0-14+deb12u1) 12.2.0");
    let gcc13 = fake_compiler(w.dir.path(), "g++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0");
    // vLLM 0.33.0 refuses GCC < 13 for CUDA builds: kiln says so before an hour of compiling.
    let v = plan(&["vllm"], "12.0", "13.0", &gcc12);
    let s = step(&v, "vllm");
    assert_eq!(s["action"], "blocked");
    assert!(s["reason"].as_str().unwrap().ends_with("cannot build: needs a host C++ compiler (g++) >=13 for its CUDA build; found 12.2.0; set CXX to a newer g++"), "{s}");
    assert_eq!(
        step(&plan(&["vllm"], "12.0", "13.0", &gcc13), "vllm")["action"],
        "build"
    );
    // flashinfer 0.7.4: SM 12.1 needs CUDA 12.9, SM 12.0 is fine with 12.8 (as 120a).
    let s = step(&plan(&["flashinfer"], "12.1", "12.8", &gcc13), "flashinfer").clone();
    assert_eq!(s["action"], "blocked");
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .contains("needs CUDA >=12.9, the toolkit is 12.8.0 ('SM 12.1+ requires CUDA >= 12.9'"),
        "{s}"
    );
    let s = step(&plan(&["flashinfer"], "12.0", "12.8", &gcc13), "flashinfer").clone();
    assert_eq!(s["action"], "build");
}

#[test]
fn a_component_that_cannot_work_on_the_arch_is_unsupported_with_the_reason() {
    let w = World::new();
    let dir = w.dir.path().join("r");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("fa3.toml"),
        "[package]\nname = \"fa3\"\ndist = \"flash-attn-3\"\nversion = \"3.0.0\"\n[source]\npath = \".\"\n\
         [[requires.rule]]\narch = [\"12.0\", \"12.1\"]\nunsupported = true\n\
         why = \"hopper/setup.py emits only sm_80/sm_90a/sm_100a code (https://github.com/Dao-AILab/flash-attention/issues/1785)\"\n",
    )
    .unwrap();
    let doctor = |arch: &str| {
        let out = w
            .kiln_with(&dir)
            .args(["doctor", "--json", "--arch", arch])
            .output()
            .unwrap();
        stdout_json(&out)["components"][0].clone()
    };
    let c = doctor("12.0");
    assert_eq!(c["status"], "unsupported");
    assert_eq!(
        c["evidence"],
        "cannot work on 12.0: hopper/setup.py emits only sm_80/sm_90a/sm_100a code (https://github.com/Dao-AILab/flash-attention/issues/1785)"
    );
    assert_eq!(doctor("9.0")["status"], "missing");
    let out = w.kiln_with(&dir).args(["install", "--arch", "12.0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the plan is blocked (see above); nothing was changed"));
}
