//! JIT proofs with a real compiler: a component whose recipe has `[verify] jit` is `ok` for an
//! arch only once its script has compiled a kernel (here with NVIDIA's nvcc from PyPI, no GPU)
//! and kiln has read the image back; `install` runs the proof and `doctor` reuses it from the
//! cache; with no toolkit it is `blocked`, naming the toolkit, and `install` says it is not ok.

use crate::common::{World, component, cuda, stdout_json, text};

const RECIPE: &str = r#"[package]
name = "fixture-jit"
dist = "kiln-fixture-pure"
version = "1.0.0"
summary = "test fixture: a package whose kernels are compiled at run time"

[source]
path = "../packages/kiln-fixture-pure"

[verify]
imports = ["kiln_fixture_pure"]
jit = "jit/nvcc.py"
jit_env = { NVCC = "{cuda_home}/bin/nvcc", JOBS = "{jobs}" }
"#;

/// Compiles the fixture kernel for each target arch, as a run-time compiler would, and counts
/// its runs in `$KILN_TEST_JIT_RUNS`.
const SCRIPT: &str = r#"import json, os, subprocess, time
work = os.environ["KILN_JIT_DIR"]
with open(os.environ["KILN_TEST_JIT_RUNS"], "a") as f:
    f.write("run\n")
time.sleep(float(os.environ.get("KILN_TEST_JIT_SLEEP", "0")))
for arch in os.environ["KILN_TARGET_ARCHS"].split():
    sm = "sm_" + arch.replace(".", "")
    out = os.path.join(work, f"axpy.{sm}.cubin")
    start = time.time()
    subprocess.run([os.environ["NVCC"], "-cubin", "-arch=" + sm, "-o", out, os.environ["KILN_TEST_SRC"]], check=True)
    print(json.dumps({"kernel": f"axpy ({sm})", "files": [out], "seconds": round(time.time() - start, 2)}))
"#;

#[test]
fn a_jit_component_is_ok_only_once_a_kernel_compiled_for_the_arch_and_was_read_back() {
    let w = World::new();
    w.write("recipes/fixture-jit.toml", RECIPE);
    w.write("recipes/jit/nvcc.py", SCRIPT);
    let runs = w.dir.path().join("jit-runs");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/axpy.cu");
    let cuda_home = cuda();
    let kiln = |args: &[&str]| {
        let mut k = w.kiln();
        k.env("KILN_TEST_JIT_RUNS", &runs).env("KILN_TEST_SRC", &src).args(args);
        k
    };

    // install proves the JIT of what it built, for the target arch, and says so.
    let out = kiln(&["install", "--json", "fixture-jit", "--arch", "12.0"])
        .env("CUDA_HOME", cuda_home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc = stdout_json(&out);
    assert_eq!(doc["result"], "ok", "{doc}");
    let verdict = &doc["jit"][0];
    assert_eq!(
        (&verdict["name"], &verdict["status"]),
        (&"fixture-jit".into(), &"ok".into()),
        "{verdict}"
    );
    assert!(
        verdict["evidence"]
            .as_str()
            .unwrap()
            .contains("compiled for 12.0: axpy (sm_120) → sm_120"),
        "{verdict}"
    );
    assert_eq!(
        verdict["proof"]["kernels"][0]["files"][0]["sass"][0], "sm_120",
        "{verdict}"
    );
    let runs_count = || std::fs::read_to_string(&runs).unwrap().lines().count();
    assert_eq!(runs_count(), 1, "install ran the proof once");
    // While it compiled, `--json` told its start and its end as events on stderr.
    let events: Vec<serde_json::Value> = text(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["task"] == "jit-proof")
        .collect();
    assert_eq!(events.len(), 2, "{}", text(&out.stderr));
    assert_eq!(
        (&events[0]["event"], &events[0]["subject"], &events[0]["detail"]),
        (&"started".into(), &"fixture-jit".into(), &"for 12.0".into())
    );
    assert_eq!(
        (&events[1]["event"], &events[1]["ok"]),
        (&"finished".into(), &true.into())
    );

    // Proven for 12.0: the kernel compiled and the image read back is sm_120; doctor takes the
    // proof install made from the cache.
    let out = kiln(&["doctor", "--json", "fixture-jit", "--arch", "12.0"])
        .env("CUDA_HOME", cuda_home)
        .output()
        .unwrap();
    let doc = stdout_json(&out);
    let c = component(&doc, "fixture-jit");
    assert_eq!(c["status"], "ok", "{c}");
    let evidence = c["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("JIT proof jit/nvcc.py compiled for 12.0: axpy (sm_120) → sm_120"),
        "{evidence}"
    );
    // Compiled and read back, but no SM 12.0 GPU here to run it: the evidence says so.
    assert!(evidence.contains("(not run: no GPU of this arch here)"), "{evidence}");
    let proof = &doc["jit"]["fixture-jit"];
    assert_eq!(proof["outcome"], "ran", "{proof}");
    assert_eq!(proof["kernels"][0]["files"][0]["sass"][0], "sm_120", "{proof}");
    let compiled = runs_count();
    assert_eq!(compiled, 1, "doctor reuses the proof install made");

    // Asked again: the proof comes from the cache; nothing compiles. With --refresh it
    // compiles again, and a wait of more than 2 s shows (plain lines on stderr when it is not a
    // terminal).
    let out = kiln(&["doctor", "fixture-jit", "--arch", "12.0", "--refresh"])
        .env("CUDA_HOME", cuda_home)
        .env("KILN_TEST_JIT_SLEEP", "3")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("kiln: JIT proof fixture-jit for 12.0\n"), "{err}");
    assert!(err.contains("kiln: done JIT proof fixture-jit ("), "{err}");
    let after = std::fs::read_to_string(&runs).unwrap().lines().count();
    assert_eq!(after, compiled + 1, "--refresh proves again");
    let out = kiln(&["doctor", "--json", "fixture-jit", "--arch", "12.0"])
        .env("CUDA_HOME", cuda_home)
        .output()
        .unwrap();
    assert_eq!(component(&stdout_json(&out), "fixture-jit")["status"], "ok");
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap().lines().count(),
        after,
        "a cached proof compiles nothing"
    );
    assert!(!text(&out.stderr).contains("JIT proof"), "nothing ran, nothing shown");

    // Another arch is another proof.
    let out = kiln(&["doctor", "--json", "fixture-jit", "--arch", "9.0"])
        .env("CUDA_HOME", cuda_home)
        .output()
        .unwrap();
    let doc = stdout_json(&out);
    assert_eq!(component(&doc, "fixture-jit")["status"], "ok");
    assert_eq!(doc["jit"]["fixture-jit"]["kernels"][0]["files"][0]["sass"][0], "sm_90");

    // No toolkit: the import still works, but nothing proves the JIT can compile: blocked,
    // naming the toolkit.
    let out = kiln(&["doctor", "--json", "fixture-jit", "--arch", "12.0"])
        .output()
        .unwrap();
    let doc = stdout_json(&out);
    let c = component(&doc, "fixture-jit");
    assert_eq!(c["status"], "blocked", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("compiles its kernels at run time with the CUDA toolkit (nvcc)"),
        "{c}"
    );

    // install with no toolkit: the component installs and imports, but install says it is not
    // ok for 12.0 and why, exits 1, and leaves it installed.
    let out = kiln(&["install", "--json", "fixture-jit", "--arch", "12.0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc = stdout_json(&out);
    assert_eq!(doc["result"], "not ok", "{doc}");
    assert_eq!(doc["jit"][0]["status"], "blocked", "{doc}");
    assert!(
        doc["jit"][0]["evidence"]
            .as_str()
            .unwrap()
            .contains("with the CUDA toolkit (nvcc), and none was found"),
        "{doc}"
    );
    w.py("import kiln_fixture_pure").unwrap();
    let out = kiln(&["install", "fixture-jit", "--arch", "12.0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("error: fixture-jit is installed and imports, but is not ok for 12.0 (blocked): JIT not proven: "),
        "{err}"
    );
    // --no-jit-proof: asked to leave the proof for later, install succeeds and says so.
    let out = kiln(&["install", "--json", "--no-jit-proof", "fixture-jit", "--arch", "12.0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc = stdout_json(&out);
    assert_eq!(
        (&doc["result"], &doc["jit"][0]["status"]),
        (&"ok".into(), &"skipped".into()),
        "{doc}"
    );
}
