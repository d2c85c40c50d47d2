//! flashinfer for real, as a new user gets it: a fresh venv, NVIDIA's CUDA compiler from PyPI,
//! and kiln's embedded recipes. `kiln install 'flashinfer[cutedsl]' --arch 12.0` installs torch
//! and the CuTe DSL with their dependencies from PyPI, builds flashinfer 0.7.4 from its sdist,
//! installs its runtime dependencies, verifies the imports and proves the JIT by compiling
//! flashinfer's silu_and_mul for SM 12.0 and a CuTe DSL kernel for sm_120a, with no GPU, and
//! reading the images back; `doctor` then shows that proof. Without a toolkit the same environment is not `ok`, and the
//! evidence names the toolkit. A second install builds nothing.
//!
//! It downloads about 3 GB from PyPI the first time (torch and the CUDA libraries; pip's cache
//! keeps them for later runs) and builds for a few minutes.

use crate::common::{World, component, cuda, kiln_bare, stdout_json, text};

#[test]
fn a_fresh_venv_gets_flashinfer_with_the_cute_dsl_and_a_jit_proven_for_sm120() {
    let w = World::new();
    let kiln = |toolkit: bool| {
        let mut k = kiln_bare();
        k.arg("--python")
            .arg(&w.python)
            .arg("--cache-dir")
            .arg(&w.cache)
            .arg("--no-progress");
        if toolkit {
            k.env("CUDA_HOME", cuda());
        }
        k
    };

    let out = kiln(true)
        .args(["install", "flashinfer[cutedsl]", "--arch", "12.0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        w.py("import flashinfer; print(flashinfer.__version__)").unwrap(),
        "0.7.4"
    );
    // install proved the JIT of what it built (doctor below takes the proof from the cache).
    let said = text(&out.stdout);
    assert!(
        said.contains("jit       flashinfer ok for 12.0: ") && said.contains("silu_and_mul → sm_120f"),
        "{said}"
    );

    let out = kiln(true)
        .args(["doctor", "--json", "flashinfer[cutedsl]", "--arch", "12.0"])
        .output()
        .unwrap();
    let doc = stdout_json(&out);
    assert!(out.status.success(), "{doc}");
    let fi = component(&doc, "flashinfer");
    assert_eq!(fi["status"], "ok", "{fi}");
    let evidence = fi["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("JIT proof jit/flashinfer.py compiled for 12.0: silu_and_mul → sm_120f"),
        "{evidence}"
    );
    // The image was read back from the module flashinfer's JIT wrote.
    let kernel = &doc["jit"]["flashinfer"]["kernels"][0];
    assert_eq!(kernel["kernel"], "silu_and_mul", "{kernel}");
    assert_eq!(kernel["files"][0]["sass"][0], "sm_120f", "{kernel}");
    assert!(
        kernel["files"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("silu_and_mul.so"),
        "{kernel}"
    );
    let dsl = component(&doc, "cutlass-dsl");
    assert_eq!(dsl["status"], "ok", "{dsl}");
    assert_eq!(
        doc["jit"]["cutlass-dsl"]["kernels"][0]["files"][0]["sass"][0],
        "sm_120a"
    );

    // The same environment with no toolkit: flashinfer imports, but nothing proves its JIT.
    let out = kiln(false)
        .args(["doctor", "--json", "flashinfer", "--arch", "12.0"])
        .output()
        .unwrap();
    let doc = stdout_json(&out);
    assert_eq!(out.status.code(), Some(1));
    let fi = component(&doc, "flashinfer");
    assert_eq!(fi["status"], "blocked", "{fi}");
    assert!(
        fi["evidence"]
            .as_str()
            .unwrap()
            .contains("with the CUDA toolkit (nvcc), and none was found"),
        "{fi}"
    );

    let out = kiln(true)
        .args(["install", "flashinfer[cutedsl]", "--arch", "12.0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("built nothing"), "{}", text(&out.stdout));
}
