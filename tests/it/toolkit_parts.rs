//! The parts of a CUDA toolkit a CMake build of vLLM uses beyond nvcc (issue 21): a toolkit put
//! together from NVIDIA's PyPI wheels (CUDA 13.0.88's compiler and runtime) has nvcc and the
//! runtime headers, and the plan blocks the build naming each part it lacks, where it looked and
//! the upstream file that needs it; completed part by part, the block goes; headers of another
//! CUDA version than nvcc block again. A part that is no part is a recipe error at its place.

use std::path::Path;

use crate::common::{World, cuda13_0, kiln_bare, stdout_json, step, text};

fn sh(args: &[&str]) {
    let st = std::process::Command::new(args[0]).args(&args[1..]).status().unwrap();
    assert!(st.success(), "{args:?}");
}

fn write(p: &Path, body: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

#[test]
fn a_toolkit_from_nvidias_wheels_blocks_the_vllm_build_naming_each_part_it_lacks() {
    let w = World::new();
    // A tree of links to the shared toolkit, so this test can complete it without changing it.
    let tk = w.dir.path().join("cuda");
    sh(&["cp", "-rs", cuda13_0().to_str().unwrap(), tk.to_str().unwrap()]);
    let gxx = w.dir.path().join("g++12");
    write(&gxx, "#!/bin/sh\necho 'g++ (Debian 12.2.0-14) 12.2.0'\n");
    sh(&["chmod", "755", gxx.to_str().unwrap()]);
    let plan = || {
        let out = kiln_bare()
            .env("KILN_NO_PREBUILT", "1")
            .env("CUDA_HOME", &tk)
            .env("CXX", &gxx)
            .arg("--python")
            .arg(&w.python)
            .arg("--cache-dir")
            .arg(&w.cache)
            .args(["plan", "--json", "--arch", "12.0", "vllm==0.26.0"])
            .output()
            .unwrap();
        assert!(out.status.code().is_some(), "{}", text(&out.stderr));
        step(&stdout_json(&out), "vllm").clone()
    };
    let lacks = |s: &serde_json::Value| -> Vec<String> {
        let r = s["reasons"].as_array().unwrap();
        let r = r.iter().find(|r| r["kind"] == "build-needs-toolkit-parts");
        r.map(|r| {
            r["lacks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["part"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
    };

    let s = plan();
    assert_eq!(s["action"], "blocked", "{s}");
    assert_eq!(
        lacks(&s),
        ["lib64", "cudart", "nvrtc", "driver-stub", "library-headers"],
        "{s}"
    );
    let reason = s["reason"].as_str().unwrap();
    let home = tk.display();
    for said in [
        format!("the CUDA toolkit at {home} lacks"),
        format!("cudart (none of {home}/lib64/libcudart.so, {home}/lib/libcudart.so; needed by FindCUDA's"),
        format!("library-headers (no {home}/include/cusparse.h, "),
        "torch 2.11.0 include/ATen/cuda/CUDAContextLight.h:9-19".to_string(),
        "point CUDA_HOME at a complete CUDA toolkit".to_string(),
        // Each with where a toolkit of NVIDIA's wheels gets it (docs/gpu-proof.md §17).
        "from: NVIDIA's wheels keep their libraries in lib/: a link lib64 -> lib".to_string(),
        "from: cuda-toolkit[nvrtc] (nvidia-cuda-nvrtc) ships lib/libnvrtc.so.<major> only".to_string(),
        "from: no NVIDIA PyPI wheel ships it".to_string(),
    ] {
        assert!(reason.contains(&said), "{said}\n in {reason}");
    }
    assert!(
        !reason.contains("header-version"),
        "the wheels' headers are nvcc's own version: {reason}"
    );

    // The parts, added one by one: the block names only what is still lacking.
    std::os::unix::fs::symlink("lib", tk.join("lib64")).unwrap();
    std::os::unix::fs::symlink("libcudart.so.13", tk.join("lib/libcudart.so")).unwrap();
    assert_eq!(lacks(&plan()), ["nvrtc", "driver-stub", "library-headers"]);
    write(&tk.join("lib/libnvrtc.so"), "");
    write(&tk.join("lib/stubs/libcuda.so"), "");
    for h in ["cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h"] {
        write(&tk.join("include").join(h), "");
    }
    let s = plan();
    assert_eq!(s["action"], "build", "{s}");
    assert!(lacks(&s).is_empty());

    // Headers of CUDA 13.5 under an nvcc 13.0: torch's cuda.cmake stops on two versions.
    let cuda_h = tk.join("include/cuda.h");
    let body = std::fs::read_to_string(&cuda_h)
        .unwrap()
        .replace("CUDA_VERSION 13000", "CUDA_VERSION 13050");
    std::fs::remove_file(&cuda_h).unwrap();
    write(&cuda_h, &body);
    let s = plan();
    assert_eq!(lacks(&s), ["header-version"], "{s}");
    assert!(
        s["reason"]
            .as_str()
            .unwrap()
            .contains("headers of CUDA 13.5, nvcc 13.0"),
        "{s}"
    );
}

#[test]
fn a_toolkit_part_kiln_does_not_know_is_an_error_at_its_place() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    write(
        &dir.join("x.toml"),
        "[package]\nname = \"x\"\nversion = \"1.0\"\n\n[source]\npath = \".\"\n\n[requires]\ntoolkit = [\"cudart\", \"cudnn\"]\n",
    );
    let out = kiln_bare().arg("recipes").arg("--recipes").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.contains("x.toml:9:22"), "{err}");
    assert!(
        err.contains("`cudnn` is not a part of a CUDA toolkit kiln checks"),
        "{err}"
    );
    assert!(
        err.contains("lib64, cudart, nvrtc, driver-stub, library-headers, header-version"),
        "{err}"
    );
}
