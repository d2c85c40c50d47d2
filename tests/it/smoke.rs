//! Smoke tests: a recipe's script runs where a GPU of the target arch is present (here one is
//! declared with KILN_GPU_ARCH, as on a machine without nvidia-smi), after every build and in
//! every doctor; a failing one makes the component `broken` with the script's own error.

use crate::common::{World, component, evidence, stdout_json, text};

/// A driver that drives 9.0 and 12.0 GPUs (R580, CUDA 13.0): a GPU without a driver runs no
/// smoke test (`tests/it/driver.rs`).
const DRIVER: &str = "580.95.05";

const SMOKE: &str = "from kiln_fixture_pure import greet\nassert greet('gpu') == 'hello, gpu', greet('gpu')\n";

fn with_smoke(w: &World) {
    w.edit(
        "recipes/fixture-pure.toml",
        "[verify]\n",
        "[verify]\nsmoke = \"smoke/fixture-pure.py\"\n",
    );
    std::fs::create_dir_all(w.recipes.join("smoke")).unwrap();
    std::fs::write(w.recipes.join("smoke/fixture-pure.py"), SMOKE).unwrap();
}

/// fixture-pure's status and evidence in `doctor --arch 9.0`, on a machine with a GPU of `gpu`.
fn pure_on(w: &World, gpu: &str) -> (String, String) {
    let v = stdout_json(
        &w.kiln()
            .env("KILN_GPU_ARCH", gpu)
            .env("KILN_DRIVER_VERSION", DRIVER)
            .args(["doctor", "--json", "--arch", "9.0", "fixture-pure"])
            .output()
            .unwrap(),
    );
    let c = component(&v, "fixture-pure");
    (
        c["status"].as_str().unwrap().to_string(),
        c["evidence"].as_str().unwrap().to_string(),
    )
}

/// `kiln install --json --arch 9.0 fixture-pure` on a machine with a 9.0 GPU.
fn install_on_9_0(w: &World) -> std::process::Output {
    w.kiln()
        .env("KILN_GPU_ARCH", "9.0")
        .env("KILN_DRIVER_VERSION", DRIVER)
        .args(["install", "--json", "--arch", "9.0", "fixture-pure"])
        .output()
        .unwrap()
}

/// Installs fixture-pure for 9.0 on a machine with a 9.0 GPU; its smoke test passed there.
fn installed_and_smoked(w: &World) {
    let out = install_on_9_0(w);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (status, evidence) = pure_on(w, "9.0");
    assert_eq!(status, "ok", "{evidence}");
    assert!(
        evidence.contains("smoke test smoke/fixture-pure.py passed on 9.0"),
        "{evidence}"
    );
}

#[test]
fn a_smoke_test_runs_where_the_gpu_is_and_its_failure_is_the_evidence() {
    let w = World::new();
    with_smoke(&w);
    installed_and_smoked(&w);
    // No GPU of the target arch: the import still proves the library loads, nothing more.
    let (status, evidence) = pure_on(&w, "12.0");
    assert_eq!(status, "ok", "{evidence}");
    assert!(
        evidence.contains("smoke test smoke/fixture-pure.py not run: no GPU of a target arch here"),
        "{evidence}"
    );

    // The module still imports, but no longer does its job: broken, with the script's error.
    let words = w.site_packages().join("kiln_fixture_pure/words.py");
    std::fs::write(&words, "def greet(name):\n    return 'bye'\n").unwrap();
    let (status, evidence) = pure_on(&w, "9.0");
    assert_eq!(status, "broken", "{evidence}");
    assert!(
        evidence.starts_with("smoke test failed: smoke/fixture-pure.py (exit status 1)"),
        "{evidence}"
    );
    assert!(evidence.contains("AssertionError: bye"), "{evidence}");

    // install rebuilds it, and the smoke test after the build is what proves the rebuild.
    let out = install_on_9_0(&w);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stdout_json(&out)["outcomes"][0]["action"], "rebuild");
    assert_eq!(pure_on(&w, "9.0").0, "ok");
}

/// The verdict after an install takes the smoke test its verification just ran (the same script
/// for the same archs, nothing installed since): on an H100 a torch extension's smoke test ran
/// twice in one install, 4.25 s each (bench/torchext, docs/gpu-proof.md §19).
#[test]
fn an_install_runs_its_smoke_test_once_and_the_verdict_after_it_takes_that_result() {
    let w = World::new();
    with_smoke(&w);
    let runs = w.dir.path().join("smoke-runs.txt");
    let counted = format!("open({:?}, 'a').write('ran\\n')\n{SMOKE}", runs.display().to_string());
    std::fs::write(w.recipes.join("smoke/fixture-pure.py"), counted).unwrap();
    let out = install_on_9_0(&w);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let c = component(&v, "fixture-pure");
    assert_eq!(c["status"], "ok", "{c}");
    assert!(
        evidence(c).contains("smoke test smoke/fixture-pure.py passed on 9.0"),
        "{c}"
    );
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "ran\n",
        "the smoke test ran more than once"
    );
    // doctor answers from the probe cache: still one run.
    assert_eq!(pure_on(&w, "9.0").0, "ok");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "ran\n");
}

#[test]
fn a_missing_smoke_script_is_a_recipe_error_at_its_key() {
    let w = World::new();
    w.edit(
        "recipes/fixture-pure.toml",
        "[verify]\n",
        "[verify]\nsmoke = \"smoke/nope.py\"\n",
    );
    let out = w.kiln().args(["recipes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("error: smoke script `smoke/nope.py` cannot be read"),
        "{err}"
    );
    assert!(err.contains("fixture-pure.toml:"), "{err}");
    assert!(err.contains("smoke = \"smoke/nope.py\""), "{err}");
}

/// A smoke test waits for the imports of the version that is installed, not for `[verify]
/// imports` a newer version declares: vLLM 0.33.0's `vllm._moe_C_stable_libtorch` does not exist
/// in 0.20.0 (recipes/vllm.toml), and on the H200 its serving proof was silently never run
/// ("not run: no GPU of a target arch here" beside a torch smoke test that had just passed).
#[test]
fn a_smoke_test_needs_the_installed_versions_own_imports() {
    let w = World::new();
    std::fs::write(
        w.recipes.join("fixture-pure.toml"),
        "[package]\nname = \"fixture-pure\"\ndist = \"kiln-fixture-pure\"\nsummary = \"test fixture: pure Python\"\n\n\
         [[versions]]\nversion = \"1.0.0\"\npath = \"../packages/kiln-fixture-pure\"\nimports = [\"kiln_fixture_pure\"]\n\n\
         [verify]\nimports = [\"kiln_fixture_pure\", \"kiln_fixture_pure.only_in_2\"]\nsmoke = \"smoke/fixture-pure.py\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(w.recipes.join("smoke")).unwrap();
    std::fs::write(w.recipes.join("smoke/fixture-pure.py"), SMOKE).unwrap();
    installed_and_smoked(&w);
}

/// A smoke script named after its component must not shadow the component's own package for the
/// children it starts: vLLM inspects a model in `python -m vllm.model_executor.models.registry`,
/// run from the script's directory without `-I`, and kiln's `vllm.py` there was the `vllm` it
/// imported ("Model architectures ['LlamaForCausalLM'] failed to be inspected", on the H200).
#[test]
fn a_smoke_script_does_not_shadow_its_components_package_in_the_children_it_starts() {
    use kiln::probe::smoke::{Script, run};
    let w = World::new();
    // `json` stands for `vllm`: a package every Python has. Imported as a module, the script
    // leaves at once with 7, so that a shadowed import cannot start it again.
    let text = "import subprocess, sys\n\
        if __name__ != '__main__':\n    raise SystemExit(7)\n\
        r = subprocess.run([sys.executable, '-c', 'import json; json.dumps({})'], capture_output=True, text=True)\n\
        assert r.returncode == 0, f'the child imported another json: exit {r.returncode} {r.stderr}'\n";
    let script = Script {
        component: "json",
        path: "smoke/json.py",
        text,
        serve: false,
    };
    let scratch = w.dir.path().join("smoke");
    let result = run(&w.python, &script, &scratch, std::time::Duration::from_secs(60));
    assert!(result.ok, "{:?}", result.error);
    assert!(scratch.join("json-smoke.py").is_file());

    // A failure's evidence is its last three lines; the whole output stays beside the script.
    let text = "for i in range(10):\n    print(f'line {i}')\nraise SystemExit('gave up')\n";
    let failing = Script { text, ..script };
    let result = run(&w.python, &failing, &scratch, std::time::Duration::from_secs(60));
    let error = result.error.unwrap();
    let log = scratch.join("json-smoke.log");
    assert!(!result.ok);
    assert!(
        error.contains(&format!("(its whole output: {})", log.display())),
        "{error}"
    );
    assert!(!error.contains("line 0"), "{error}");
    let kept = std::fs::read_to_string(&log).unwrap();
    assert!(
        kept.contains("line 0") && kept.contains("line 9") && kept.contains("gave up"),
        "{kept}"
    );
}

/// What a smoke script leaves running is killed when it returns, even a process that left the
/// script's group for a session of its own (an engine's workers, a JIT compile): on the H200 the
/// next kiln found 52 processes left by vLLM's serving proof.
#[test]
fn what_a_smoke_script_leaves_running_is_killed_when_it_returns() {
    use kiln::probe::smoke::{Script, run};
    let w = World::new();
    let pid_file = w.dir.path().join("left.pid");
    let text = format!(
        "import subprocess, sys\n\
         p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n\
         open({:?}, 'w').write(str(p.pid))\n",
        pid_file.display().to_string()
    );
    let script = Script {
        component: "leaver",
        path: "smoke/leaver.py",
        text: &text,
        serve: false,
    };
    let result = run(
        &w.python,
        &script,
        &w.dir.path().join("smoke"),
        std::time::Duration::from_secs(60),
    );
    assert!(result.ok, "{:?}", result.error);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    // Gone, or a zombie waiting for its new parent to reap it: not running.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit(')').next()?.split_whitespace().next().map(str::to_string));
    assert!(
        matches!(state.as_deref(), None | Some("Z")),
        "sleep {pid} is still {state:?}"
    );
}
