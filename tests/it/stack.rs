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
        // The kernel packages SGLang 0.5.23 pins are components of their own: flash-attn-4 from
        // its sdist (no prebuilt wheels here), the wheel-only sgl-deep-gemm and sgl-flash-mla
        // from the index; flashinfer-cubin, which only 0.5.11 pins, is no step.
        ("flash-attn-4", "build"),
        ("flashinfer", "build"),
        ("sgl-deep-gemm", "install"),
        ("sgl-flash-mla", "install"),
        ("sglang-kernel", "build"),
        ("sglang", "build"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(steps(&v), expect);
    let fi = step(&v, "flashinfer");
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
    assert_eq!(step(&plan_json(&w, Some("12.8")), "flashinfer")["action"], "build");

    // Without a toolkit, everything that compiles against it is blocked, with the root cause.
    if which::which("nvcc").is_err() && !std::path::Path::new("/usr/local/cuda/bin/nvcc").exists() {
        let v = plan_json(&w, None);
        let s = &v["steps"];
        assert_eq!(s[0]["action"], "blocked");
        assert!(s[0]["reason"].as_str().unwrap().starts_with("no CUDA toolkit found"));
        let fi = step(&v, "flashinfer");
        assert_eq!(fi["action"], "blocked");
        assert!(
            fi["reason"]
                .as_str()
                .unwrap()
                .starts_with("needs cuda-toolkit: no CUDA toolkit found")
        );
        assert_eq!(
            step(&v, "sglang")["reason"],
            "needs sglang-kernel, which is blocked by cuda-toolkit"
        );
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
fn doctor_lists_all_fourteen_components_truthfully() {
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
    assert_eq!(comps.len(), 14);
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

/// Issue 22's done-when: on a fresh venv, `kiln plan sglang --arch 12.0` shows the kernel
/// packages SGLang 0.5.23 pins as components, each with its own verdict read from its real PyPI
/// wheel (fetched through the test download cache): flash-attn-4 and sgl-deep-gemm hold no
/// prebuilt kernel (CuTe DSL JIT; DeepGEMM's nvcc JIT), sgl-flash-mla's two extensions hold no
/// 12.0 image and are optional there by design, with the upstream reason. A driver is said by
/// `KILN_DRIVER_VERSION` (flash_mla's and sgl_kernel's extensions link libcuda.so.1).
#[test]
fn sglang_0_5_23_plans_its_kernel_packages_as_components_with_their_own_verdicts() {
    let w = World::new();
    let mut v = serde_json::Value::Null;
    let mut human = String::new();
    crate::common::share_sources(&w.cache, || {
        let plan = |json: bool| {
            let mut c = kiln_bare();
            c.arg("--python")
                .arg(&w.python)
                .arg("--cache-dir")
                .arg(&w.cache)
                .env("KILN_CUDA_VERSION", "13.0")
                .env("KILN_DRIVER_VERSION", "580.95.05")
                .args(["plan", "sglang", "--arch", "12.0"]);
            if json {
                c.arg("--json");
            }
            c.output().unwrap()
        };
        v = stdout_json(&plan(true));
        human = text(&plan(false).stdout);
    });
    assert_eq!(step(&v, "sglang")["version"], "0.5.23", "{v}");
    for name in ["flash-attn-4", "sgl-deep-gemm", "sgl-flash-mla"] {
        let s = step(&v, name);
        assert_eq!(s["action"], "install", "{s}");
        assert_eq!(s["prebuilt"]["install"], true, "{s}");
        assert_eq!(s["prebuilt"]["binaries"]["archs"], serde_json::json!(["12.0"]), "{s}");
    }
    // No prebuilt kernel in the two JIT packages.
    for name in ["flash-attn-4", "sgl-deep-gemm"] {
        assert_eq!(step(&v, name)["prebuilt"]["binaries"]["checked"], 0, "{name}");
    }
    assert_eq!(step(&v, "flash-attn-4")["version"], "4.0.0b36");
    assert_eq!(step(&v, "sgl-deep-gemm")["version"], "0.2.3.post2");
    // sgl-flash-mla: both extensions read, neither holds 12.0, both optional there by design.
    let mla = &step(&v, "sgl-flash-mla")["prebuilt"]["binaries"];
    assert_eq!((&mla["checked"], &mla["required"]), (&2.into(), &0.into()), "{mla}");
    let mut optional: Vec<&str> = mla["optional_missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    optional.sort();
    assert_eq!(
        optional,
        ["flash_mla/_C_legacy.abi3.so", "flash_mla/cuda.abi3.so"],
        "{mla}"
    );
    assert!(
        mla["optional_missing"][0]["optional"]
            .as_str()
            .unwrap()
            .contains("flash_mla/_loader.py:9-13"),
        "{mla}"
    );
    // flashinfer-cubin is pinned by SGLang 0.5.11 only: no step here.
    assert!(
        !v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "flashinfer-cubin"),
        "{v}"
    );
    // A person sees a verdict line under each.
    for (name, line) in [
        (
            "flash-attn-4",
            "the prebuilt wheel flash_attn_4-4.0.0b36-py3-none-any.whl qualifies",
        ),
        (
            "sgl-deep-gemm",
            "the prebuilt wheel sgl_deep_gemm-0.2.3.post2-py3-none-",
        ),
        (
            "sgl-flash-mla",
            "flash_mla/cuda.abi3.so for 12.0: no usable image (holds sm_100a, sm_103a, sm_107a; CUDA error 209, no kernel image) [optional: FlashMLA has kernels for SM90",
        ),
    ] {
        let lines: Vec<&str> = human.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains(". install") && l.split_whitespace().nth(2) == Some(name))
            .unwrap_or_else(|| panic!("{name}: {human}"));
        let is_step = |l: &&str| {
            l.trim_start()
                .split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        };
        let block: Vec<&str> = lines[at + 1..].iter().take_while(|l| !is_step(l)).copied().collect();
        assert!(block.iter().any(|l| l.contains(line)), "{name}: {block:?}");
    }
}
