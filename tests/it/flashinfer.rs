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

use std::path::Path;
use std::process::Command as StdCommand;

use crate::common::{World, component, copy_dir, cuda, kiln_bare, stdout_json, text};

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

    warm_cache_loads_without_a_compiler(&w);

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

/// `install --aot` on the environment above, with the recipe's [aot] list cut to silu_and_mul
/// (the whole list compiles for many minutes on 2 cores): the module goes into kiln's cache and
/// into flashinfer's AOT directory with the run-time defaults; a fresh interpreter with no nvcc,
/// no CUDA_HOME and flashinfer's JIT disabled loads it; `kiln arch` reads sm_120f from the copy.
fn warm_cache_loads_without_a_compiler(w: &World) {
    let recipes = w.dir.path().join("aot-recipes");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes"), &recipes);
    let toml = recipes.join("flashinfer.toml");
    let text_of = std::fs::read_to_string(&toml).unwrap();
    let line = text_of
        .lines()
        .find(|l| l.starts_with("modules = ["))
        .unwrap()
        .to_string();
    std::fs::write(&toml, text_of.replace(&line, "modules = [\"silu_and_mul\"]")).unwrap();

    let install_aot = || {
        kiln_bare()
            .arg("--python")
            .arg(&w.python)
            .arg("--cache-dir")
            .arg(&w.cache)
            .arg("--recipes")
            .arg(&recipes)
            .args([
                "--no-progress",
                "--json",
                "install",
                "flashinfer",
                "--arch",
                "12.0",
                "--aot",
            ])
            .env("CUDA_HOME", cuda())
            .output()
            .unwrap()
    };
    // A module no recipe in scope compiles: refused before anything runs, naming those known.
    let out = kiln_bare()
        .arg("--python")
        .arg(&w.python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .arg("--recipes")
        .arg(&recipes)
        .args([
            "--no-progress",
            "install",
            "flashinfer",
            "--arch",
            "12.0",
            "--aot-module",
            "fused_moe",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("--aot-module fused_moe: no component in scope compiles it ahead of time")
            && err.contains("flashinfer: silu_and_mul, cutlass_fused_moe"),
        "{err}"
    );

    let out = install_aot();
    let doc = stdout_json(&out);
    assert!(out.status.success(), "{doc}\n{}", text(&out.stderr));
    let aot = &doc["aot"][0];
    assert_eq!(aot["ok"], true, "{aot}");
    assert_eq!(aot["from_cache"], false, "{aot}");
    let m = &aot["modules"][0];
    assert_eq!(m["module"], "silu_and_mul", "{m}");
    assert_eq!(m["sass"][0], "sm_120f", "{m}");
    let installed = m["path"].as_str().unwrap();
    assert!(
        installed.ends_with("flashinfer/data/aot/silu_and_mul/silu_and_mul.so"),
        "{m}"
    );
    let entry = Path::new(aot["entry"].as_str().unwrap());
    assert!(entry.starts_with(w.cache.join("aot")) && entry.join("manifest.json").is_file());

    // A fresh process: no compiler reachable, JIT off; the run-time file sets the arch list.
    let empty = w.dir.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let code = "import os; from flashinfer.jit.activation import gen_act_and_mul_module as g; \
                s = g('silu'); s.build_and_load(); print(os.environ['FLASHINFER_CUDA_ARCH_LIST'], s.is_aot, s.get_library_path())";
    let run = StdCommand::new(&w.python)
        .args(["-c", code])
        .current_dir(w.dir.path())
        .env("PATH", &empty)
        .env("CUDA_HOME", empty.join("none"))
        .env("FLASHINFER_DISABLE_JIT", "1")
        .env("FLASHINFER_WORKSPACE_BASE", w.dir.path().join("ws"))
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout).trim(), format!("12.0f True {installed}"));

    // kiln's reader on the cached copy.
    let so = entry.join("files/flashinfer/data/aot/silu_and_mul/silu_and_mul.so");
    let out = kiln_bare()
        .arg("arch")
        .arg(&so)
        .args(["--arch", "12.0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("loads sm_120f"), "{}", text(&out.stdout));

    // Again: from the cache, nothing compiled.
    let out = install_aot();
    let doc = stdout_json(&out);
    assert!(out.status.success(), "{doc}");
    assert_eq!(doc["aot"][0]["from_cache"], true, "{doc}");
}
