//! The driver judged by NVIDIA's tables, on real installed distributions (stand-ins named torch
//! whose version label says which CUDA they are built for) and the project's own recipes.
//!
//! Ground truth:
//! - NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" (CUDA Toolkit release notes,
//!   <https://docs.nvidia.com/cuda/archive/13.0.1/cuda-toolkit-release-notes/index.html>):
//!   CUDA 12.6 GA needs driver >= 560.28.03, 12.8 GA >= 570.26, 12.9 GA >= 575.51.03, 13.0 GA
//!   >= 580.65.06; so driver 560.35.03 supports CUDA 12.6 at most and 570.124.06 CUDA 12.8.
//! - "Running any NVIDIA CUDA workload on NVIDIA Blackwell requires a compatible driver (R570 or
//!   higher)"; "CUDA 12.8 is the first CUDA version that natively supports Blackwell (compute
//!   capabilities 10.0 and 12.0)" (NVIDIA's Software Migration Guide for Blackwell RTX GPUs,
//!   <https://forums.developer.nvidia.com/t/software-migration-guide-for-nvidia-blackwell-rtx-gpus-a-guide-to-cuda-12-8-pytorch-tensorrt-and-llama-cpp/321330>).
//! - `sm_121` first appears in CUDA 12.9 (CUDA 12.8's ptxas rejects `sm_121`), so SM 12.1 needs
//!   R575.

use std::path::Path;

use crate::common::{World, component, stand_in, stdout_json, text};

fn recipes() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes")
}

/// `doctor --json --arch ARCH torch` with the driver overrides in `env`: (status, evidence).
fn torch_on(w: &World, arch: &str, env: &[(&str, &str)]) -> (String, String) {
    let mut c = w.kiln_with(&recipes());
    c.env_remove("KILN_DRIVER_CUDA")
        .envs(env.iter().copied())
        .args(["doctor", "--json", "--arch", arch, "torch"]);
    let out = c.output().unwrap();
    let v = stdout_json(&out);
    let t = component(&v, "torch");
    (
        t["status"].as_str().unwrap().to_string(),
        t["evidence"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_driver_older_than_the_gpus_generation_is_blocked_naming_the_minimum() {
    let w = World::new();
    // A cu128 torch: CUDA 12.8 builds run on any 12.x driver by minor version compatibility.
    stand_in(&w.python, w.dir.path(), "torch", "2.8.0+cu128", "torch", &[]);
    let r560 = [("KILN_DRIVER_VERSION", "560.35.03"), ("KILN_DRIVER_CUDA", "12.6")];
    for arch in ["12.0", "10.0"] {
        let (status, why) = torch_on(&w, arch, &r560);
        assert_eq!(status, "blocked", "--arch {arch}: {why}");
        assert!(
            why.contains(&format!(
                "torch 2.8.0+cu128 cannot run on a {arch} GPU with driver 560.35.03 (KILN_DRIVER_VERSION): \
                 a {arch} GPU needs CUDA 12.8, driver R570 (570.26) or newer"
            )),
            "{why}"
        );
    }
    // Hopper is driven by R560: only the minor-version note remains.
    let (status, why) = torch_on(&w, "9.0", &r560);
    assert_eq!(status, "ok", "{why}");
    // R570 drives 12.0 but not 12.1, which needs CUDA 12.9 (R575).
    let r570 = [("KILN_DRIVER_VERSION", "570.124.06")];
    assert_eq!(torch_on(&w, "12.0", &r570).0, "ok");
    let (status, why) = torch_on(&w, "12.1", &r570);
    assert_eq!(status, "blocked", "{why}");
    assert!(
        why.contains("a 12.1 GPU needs CUDA 12.9, driver R575 (575.51.03) or newer"),
        "{why}"
    );
    assert_eq!(torch_on(&w, "12.1", &[("KILN_DRIVER_VERSION", "575.57.08")]).0, "ok");
}

#[test]
fn a_driver_version_alone_says_its_cuda_and_an_impossible_pair_is_refused() {
    let w = World::new();
    // torch 2.14.1's PyPI wheel is +cu130: a CUDA 13 runtime needs an R580 driver.
    stand_in(&w.python, w.dir.path(), "torch", "2.14.1+cu130", "torch", &[]);
    let (status, why) = torch_on(&w, "12.0", &[("KILN_DRIVER_VERSION", "570.124.06")]);
    assert_eq!(status, "blocked", "{why}");
    assert!(
        why.contains(
            "the driver supports CUDA 12.8 (driver 570.124.06 (KILN_DRIVER_VERSION) by NVIDIA's driver table, R570 from 570.26)"
        ),
        "{why}"
    );
    assert_eq!(torch_on(&w, "12.0", &[("KILN_DRIVER_VERSION", "580.95.05")]).0, "ok");
    // No R560 driver supports CUDA 13.0: a usage error naming both and the table's row.
    let out = w
        .kiln_with(&recipes())
        .env("KILN_DRIVER_VERSION", "560.35.03")
        .env("KILN_DRIVER_CUDA", "13.0")
        .args(["doctor", "torch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "KILN_DRIVER_VERSION=560.35.03 and KILN_DRIVER_CUDA=13.0 cannot both hold: NVIDIA's table gives \
             driver 560.35.03 (R560, from 560.28.03) CUDA 12.6, and CUDA 12.8 needs driver 570.26 or newer"
        ),
        "{err}"
    );
}

#[test]
fn a_smoke_test_that_cannot_run_names_the_driver() {
    let w = World::new();
    stand_in(&w.python, w.dir.path(), "torch", "2.14.1+cu130", "torch", &[]);
    // A 12.0 GPU and no driver: the smoke test (recipes/smoke/torch.py) is not run to fail on
    // `torch.cuda.is_available() is False`; what stops it is said.
    let machine_has_driver = Path::new("/proc/driver/nvidia/version").exists() || which("nvidia-smi");
    if !machine_has_driver {
        let (status, why) = torch_on(&w, "12.0", &[("KILN_GPU_ARCH", "12.0")]);
        assert_eq!(status, "blocked", "{why}");
        assert!(
            why.contains("smoke test smoke/torch.py cannot run on the 12.0 GPU here: no NVIDIA driver found"),
            "{why}"
        );
        assert!(!why.contains("is_available"), "{why}");
    }
    let (status, why) = torch_on(
        &w,
        "12.0",
        &[("KILN_GPU_ARCH", "12.0"), ("KILN_DRIVER_VERSION", "560.35.03")],
    );
    assert_eq!(status, "blocked", "{why}");
    assert!(
        why.contains("smoke test smoke/torch.py cannot run on the 12.0 GPU here: driver 560.35.03 cannot drive it"),
        "{why}"
    );
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// `outdated` only from what is there or asked: SGLang 0.5.23 and sglang-kernel 0.4.10 pin torch
/// 2.14.1 (upstream's pins, recipes/sglang.toml and recipes/sglang-kernel.toml); flash-attn
/// 2.8.3.post2 compiles only below torch 2.14 (its setup.py:201,220 `-std=c++17` against
/// torch 2.14's `ATen.h:4-5` C++20 `#error`, recipes/flash-attn.toml). With flash-attn neither
/// installed nor asked for, its bound says nothing of the installed torch.
#[test]
fn a_component_nobody_installed_or_asked_for_does_not_judge_the_installed_ones() {
    let w = World::new();
    stand_in(&w.python, w.dir.path(), "torch", "2.14.1", "torch", &[]);
    let doctor = |targets: &[&str]| {
        let mut c = w.kiln_with(&recipes());
        c.env_remove("KILN_DRIVER_CUDA")
            .args(["doctor", "--json"])
            .args(targets);
        stdout_json(&c.output().unwrap())
    };
    let v = doctor(&[]);
    let t = component(&v, "torch");
    assert_eq!(t["status"], "ok", "{t}");
    assert!(!t["evidence"].as_str().unwrap().contains("flash-attn"), "{t}");
    // Asked for, flash-attn's bound is the user's concern: torch 2.14.1 is outdated for it.
    let v = doctor(&["flash-attn"]);
    let t = component(&v, "torch");
    assert_eq!(t["status"], "outdated", "{t}");
    assert!(
        t["evidence"]
            .as_str()
            .unwrap()
            .contains("have 2.14.1, flash-attn needs torch >=2.7,<2.14"),
        "{t}"
    );
    // And plain `kiln lock` locks the environment instead of refusing torch as outdated.
    let lockfile = w.dir.path().join("kiln.lock");
    let out = w
        .kiln_with(&recipes())
        .env_remove("KILN_DRIVER_CUDA")
        .args(["lock", "-o"])
        .arg(&lockfile)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("outdated"), "{err}");
    assert!(out.status.success(), "{err}");
    let lock = std::fs::read_to_string(&lockfile).unwrap();
    assert!(lock.contains("torch"), "{lock}");
}

/// flashinfer uses flashinfer-cubin only at exactly its own version: flashinfer 0.7.2's
/// `flashinfer/jit/env.py:79-90` compares `flashinfer_cubin.__version__` with its own and
/// `:119-127` logs "Ignoring incompatible flashinfer-cubin package" and downloads the cubins on
/// demand instead (read in the PyPI wheel flashinfer_python-0.7.2-py3-none-any.whl).
#[test]
fn a_flashinfer_cubin_of_another_version_is_named_on_flashinfer() {
    let w = World::new();
    stand_in(&w.python, w.dir.path(), "flashinfer-python", "0.7.2", "flashinfer", &[]);
    stand_in(
        &w.python,
        w.dir.path(),
        "flashinfer-cubin",
        "0.6.8.post1",
        "flashinfer_cubin",
        &[],
    );
    let doctor = || {
        let mut c = w.kiln_with(&recipes());
        c.env_remove("KILN_DRIVER_CUDA")
            .args(["doctor", "--json", "flashinfer"]);
        stdout_json(&c.output().unwrap())
    };
    let v = doctor();
    let f = component(&v, "flashinfer");
    let kinds: Vec<&str> = f["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"companion-ignored"), "{f}");
    assert_eq!(f["status"], "outdated", "{f}");
    assert!(
        f["evidence"].as_str().unwrap().contains(
            "flashinfer-cubin 0.6.8.post1 is installed, and flashinfer 0.7.2 uses only flashinfer-cubin 0.7.2: it ignores it"
        ),
        "{f}"
    );
    // The matching version: nothing to say.
    stand_in(
        &w.python,
        w.dir.path(),
        "flashinfer-cubin",
        "0.7.2",
        "flashinfer_cubin",
        &[],
    );
    let v = doctor();
    let f = component(&v, "flashinfer");
    assert!(!f.to_string().contains("companion-ignored"), "{f}");
}

/// The install the issue saw (R570, CUDA 12.8: "installed and verified", then `doctor` says
/// blocked) is refused at plan time: PyPI's torch 2.14.1 Linux wheel is a CUDA 13.0 build
/// (`recipes/torch.toml` runtime_cuda; its siblings' METADATA require `cuda-toolkit==13.0.x`), and
/// a CUDA 13 runtime needs an R580 driver (NVIDIA's table above, and minor version compatibility
/// covers one major family only).
#[test]
fn a_wheel_built_for_a_newer_cuda_than_the_driver_is_refused_at_plan_time() {
    let w = World::new();
    let plan = |driver: &str| {
        let out = w
            .kiln_with(&recipes())
            .env_remove("KILN_DRIVER_CUDA")
            .env("KILN_DRIVER_VERSION", driver)
            .env("KILN_NO_PREBUILT", "1")
            .args(["plan", "--json", "--arch", "9.0", "torch"])
            .output()
            .unwrap();
        let v = stdout_json(&out);
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "torch")
            .unwrap()
            .clone()
    };
    let s = plan("570.124.06");
    assert_eq!(s["action"], "blocked", "{s}");
    assert!(
        s["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "driver-too-old"),
        "{s}"
    );
    // The newest torch this interpreter may have: 2.15.0 (CUDA 13.2) needs Python >= 3.11
    // (its own `python` in the recipe), else 2.14.1 (CUDA 13.0).
    let minor: u32 = w.py("import sys; print(sys.version_info[1])").unwrap().parse().unwrap();
    let (torch, cuda) = if minor >= 11 {
        ("torch 2.15.0", "CUDA 13.2")
    } else {
        ("torch 2.14.1", "CUDA 13.0")
    };
    let why = s["reason"].as_str().unwrap();
    assert!(
        why.contains(torch) && why.contains(cuda) && why.contains("12.8"),
        "{why}"
    );
    // An R580 driver (CUDA 13.0) runs it: a newer minor of the same major, by minor version
    // compatibility.
    assert_eq!(plan("580.95.05")["action"], "install");
}

/// A CUDA component not yet built (its binaries unknown) for a GPU generation the driver cannot
/// drive is refused at plan time, before any fetch or build; the install stops there too. The
/// fixture's build needs the toolkit (`[depends] cuda-toolkit`), so whatever it compiles is CUDA
/// code that an R560 driver cannot run on a 12.0 GPU (R570 or newer, NVIDIA's Blackwell
/// migration guide above); R570 is not refused for the driver.
#[test]
fn a_cuda_build_for_a_gpu_the_driver_cannot_drive_is_refused_at_plan_time() {
    let w = World::new();
    let recipes = w.dir.path().join("fixtures/cuda-recipes");
    let cuda_home = crate::common::cuda().to_path_buf();
    let kiln = |driver: &str, args: &[&str]| {
        let mut c = w.kiln_with(&recipes);
        c.env("CUDA_HOME", &cuda_home)
            .env_remove("KILN_DRIVER_CUDA")
            .env("KILN_DRIVER_VERSION", driver)
            .args(args);
        c.output().unwrap()
    };
    let fixture_step = |driver: &str| {
        let v = stdout_json(&kiln(driver, &["plan", "--json", "--arch", "12.0", "fixture-cuda"]));
        crate::common::step(&v, "fixture-cuda").clone()
    };
    let step = fixture_step("560.35.03");
    assert_eq!(step["action"], "blocked", "{step}");
    let reason = step["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "driver-cannot-drive")
        .unwrap_or_else(|| panic!("no driver-cannot-drive reason: {step}"));
    assert_eq!(reason["arch"], "12.0", "{step}");
    assert_eq!(reason["needs_branch"], "R570", "{step}");
    let out = kiln("560.35.03", &["install", "--arch", "12.0", "fixture-cuda"]);
    assert!(!out.status.success());
    let err = text(&out.stderr) + &text(&out.stdout);
    assert!(
        err.contains("cannot run on a 12.0 GPU with driver 560.35.03 (KILN_DRIVER_VERSION)"),
        "{err}"
    );
    assert!(
        w.py("import kiln_fixture_cuda").is_err(),
        "nothing was built or installed"
    );
    // R570 drives 12.0: the plan builds it.
    let step = fixture_step("570.124.06");
    assert_eq!(step["action"], "build", "{step}");
}
