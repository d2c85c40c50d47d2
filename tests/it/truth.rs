//! The truthful probe on real builds: kernels cross-compiled for the wrong arch are `wrong-arch`
//! with the files as evidence; a dependency changed behind kiln's back makes its ABI dependents
//! `stale` with old → new.

use std::process::Command as StdCommand;

use crate::common::{World, component, cuda, stdout_json, text};

#[test]
fn kernels_for_another_arch_are_wrong_arch_and_a_rebuild_fixes_them() {
    let w = World::new();
    let recipes = w.dir.path().join("fixtures/cuda-recipes");
    let cuda_home = cuda().to_path_buf();
    let kiln = |args: &[&str]| {
        let mut c = w.kiln_with(&recipes);
        c.env("CUDA_HOME", &cuda_home).args(args);
        c.output().unwrap()
    };
    // Built for Hopper only (sm_90), by nvcc from PyPI: no GPU involved.
    let out = kiln(&["install", "--arch", "9.0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&kiln(&["doctor", "--json", "--arch", "12.0"]));
    let c = component(&v, "fixture-cuda");
    assert_eq!(c["status"], "wrong-arch");
    assert_eq!(
        c["evidence"],
        "1 of 1 required CUDA binary lacks a kernel image: kiln_fixture_cuda/_kernels.so for 12.0: no usable image (holds sm_90; CUDA error 209, no kernel image)"
    );
    assert_eq!(component(&v, "cuda-toolkit")["status"], "ok");
    // The plan rebuilds it for 12.0, spelled the way the package wants it.
    let v = stdout_json(&kiln(&["plan", "--json", "--arch", "12.0"]));
    let step = &v["steps"][1];
    assert_eq!(
        (step["name"].as_str(), step["action"].as_str()),
        (Some("fixture-cuda"), Some("rebuild"))
    );
    assert_eq!(step["env"]["FIXTURE_CUDA_ARCHS"], "120");
    let out = kiln(&["install", "--arch", "12.0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&kiln(&["doctor", "--json", "--arch", "12.0"]));
    let c = component(&v, "fixture-cuda");
    assert_eq!(c["status"], "ok", "{c}");
    // Facts with kernel listings survive the probe cache: the next look is a hit, same answer.
    let again = stdout_json(&kiln(&["doctor", "--json", "--arch", "12.0"]));
    assert_eq!(again["machine"]["probe_cache"], "hit");
    assert_eq!(again["components"], v["components"]);
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .ends_with("every required CUDA binary holds kernels for 12.0 (1 checked)"),
        "{c}"
    );
    // kiln records what it built, for which arch and toolkit.
    let rec = w
        .py("import importlib.metadata as m; print(m.distribution('kiln-fixture-cuda').read_text('kiln.json'))")
        .unwrap();
    let rec: serde_json::Value = serde_json::from_str(&rec).unwrap();
    assert_eq!(rec["archs"], serde_json::json!(["12.0"]));
    assert!(rec["cuda"].as_str().unwrap().starts_with("13."));
}

#[test]
fn a_dependency_replaced_behind_kilns_back_makes_abi_dependents_stale() {
    let w = World::new();
    w.edit("recipes/fixture-app.toml", "abi = false", "abi = true");
    assert!(w.kiln().arg("install").output().unwrap().status.success());
    let rec = w
        .py("import importlib.metadata as m; print(m.distribution('kiln-fixture-app').read_text('kiln.json'))")
        .unwrap();
    let rec: serde_json::Value = serde_json::from_str(&rec).unwrap();
    let old = rec["built_against"]["fixture-cext"].as_str().unwrap().to_string();
    assert!(old.starts_with("kiln-fixture-cext 1.0.0 wheel "), "{old}");

    // The user rebuilds the C extension by hand with pip: a new binary kiln did not make.
    w.edit(
        "packages/kiln-fixture-cext/pyproject.toml",
        "version = \"1.0.0\"",
        "version = \"1.0.1\"",
    );
    let out = crate::common::pip_install(&w.python)
        .args(["--no-build-isolation", "--force-reinstall"])
        .arg(w.packages.join("kiln-fixture-cext"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        !text(&out.stderr).contains("invalid metadata"),
        "kiln.json is removed with its dist: {}",
        text(&out.stderr)
    );
    let v = stdout_json(&w.kiln().args(["doctor", "--json"]).output().unwrap());
    assert_eq!(component(&v, "fixture-cext")["status"], "ok");
    let app = component(&v, "fixture-app");
    assert_eq!(app["status"], "stale");
    assert_eq!(
        app["evidence"],
        format!("built against {old}, now kiln-fixture-cext 1.0.1")
    );
    let v = stdout_json(&w.kiln().args(["plan", "--json"]).output().unwrap());
    let actions: Vec<(&str, &str)> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        actions,
        [
            ("fixture-cext", "keep"),
            ("fixture-pure", "keep"),
            ("fixture-app", "rebuild")
        ]
    );
    assert!(w.kiln().arg("install").output().unwrap().status.success());
    let v = stdout_json(&w.kiln().args(["doctor", "--json"]).output().unwrap());
    assert_eq!(component(&v, "fixture-app")["status"], "ok");
}

#[test]
fn an_import_that_crashes_or_hangs_is_pinned_on_its_component_and_the_others_still_report() {
    let w = World::new();
    let site = w.site_packages();
    std::fs::write(site.join("kiln_crash.py"), "import ctypes\nctypes.string_at(0)\n").unwrap();
    std::fs::write(site.join("kiln_hang.py"), "import time\ntime.sleep(600)\n").unwrap();
    std::fs::write(site.join("kiln_fine.py"), "VALUE = 1\n").unwrap();
    let dir = w.dir.path().join("iso");
    std::fs::create_dir(&dir).unwrap();
    // Three components on a distribution every venv has (pip), each proving itself by one import;
    // `a-crash` is probed first, then `b-hang`, then `c-fine`.
    for (name, module) in [
        ("a-crash", "kiln_crash"),
        ("b-hang", "kiln_hang"),
        ("c-fine", "kiln_fine"),
    ] {
        std::fs::write(
            dir.join(format!("{name}.toml")),
            format!("[package]\nname = \"{name}\"\ndist = \"pip\"\nversion = \"1\"\naccepts = \"*\"\n[source]\npath = \".\"\n[verify]\nimports = [\"{module}\"]\n"),
        )
        .unwrap();
    }
    let started = std::time::Instant::now();
    let out = w
        .kiln_with(&dir)
        .args(["doctor", "--json", "--import-timeout", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the hang was not waited for"
    );
    let v = stdout_json(&out);
    let crash = component(&v, "a-crash");
    assert_eq!(crash["status"], "broken");
    assert!(
        crash["evidence"]
            .as_str()
            .unwrap()
            .starts_with("import kiln_crash failed: crashed the interpreter (killed by signal 11 (SIGSEGV))"),
        "{crash}"
    );
    let hang = component(&v, "b-hang");
    assert_eq!(hang["status"], "broken");
    assert_eq!(
        hang["evidence"],
        "import kiln_hang failed: timed out: the import did not finish within 3 s"
    );
    assert_eq!(component(&v, "c-fine")["status"], "ok");
}

#[test]
fn an_unchanged_environment_is_rechecked_without_starting_python() {
    let w = World::new();
    assert!(w.kiln().arg("install").output().unwrap().status.success());
    // A python that logs every start, so the test sees whether kiln ran it.
    let log = w.dir.path().join("python-starts.log");
    let wrapper = w.dir.path().join("python-logged");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho start >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            w.python.display()
        ),
    )
    .unwrap();
    StdCommand::new("chmod").arg("755").arg(&wrapper).status().unwrap();
    let starts = || std::fs::read_to_string(&log).map(|s| s.lines().count()).unwrap_or(0);
    let doctor = |extra: &[&str]| {
        let mut c = crate::common::kiln_bare();
        // CPUs enough for an interpreter per component, whatever this machine has.
        c.env("KILN_CPUS", "8")
            .arg("--recipes")
            .arg(&w.recipes)
            .arg("--python")
            .arg(&wrapper)
            .arg("--cache-dir")
            .arg(&w.cache);
        let out = c.args(["doctor", "--json"]).args(extra).output().unwrap();
        stdout_json(&out)
    };
    let first = doctor(&[]);
    assert_eq!(first["machine"]["probe_cache"], "miss");
    assert_eq!(
        starts(),
        4,
        "one interpreter lists the distributions, one per component imports"
    );
    let again = doctor(&[]);
    assert_eq!(again["machine"]["probe_cache"], "hit");
    assert_eq!(starts(), 4, "no Python process on a warm, unchanged environment");
    assert_eq!(again["components"], first["components"]);

    // An edited file of a package invalidates it and what depends on it (fixture-app), no more.
    let words = w.site_packages().join("kiln_fixture_pure/words.py");
    let text = std::fs::read_to_string(&words).unwrap();
    std::fs::write(&words, format!("{text}\nraise ImportError('edited')\n")).unwrap();
    let edited = doctor(&[]);
    assert_eq!(edited["machine"]["probe_cache"], "miss");
    assert_eq!(component(&edited, "fixture-pure")["status"], "broken");
    assert_eq!(starts(), 6);
    let sources = &edited["machine"]["probe_sources"];
    assert_eq!(sources["distributions"], "hit", "{sources}");
    assert_eq!(
        sources["imports"],
        serde_json::json!({"fixture-app": "miss", "fixture-cext": "hit", "fixture-pure": "miss"})
    );
    std::fs::write(&words, text).unwrap();

    // So does a removal.
    let st = StdCommand::new(&w.python)
        .args(["-m", "pip", "uninstall", "-y", "-q", "kiln-fixture-app"])
        .status()
        .unwrap();
    assert!(st.success());
    let removed = doctor(&[]);
    assert_eq!(removed["machine"]["probe_cache"], "miss");
    assert_eq!(component(&removed, "fixture-app")["status"], "missing");

    // --refresh probes even when nothing changed.
    assert_eq!(doctor(&[])["machine"]["probe_cache"], "hit");
    assert_eq!(doctor(&["--refresh"])["machine"]["probe_cache"], "refresh");
}

/// A directory of stand-in tools that print what the real ones printed on an H200 machine.
fn h200_tools(dir: &std::path::Path) -> std::path::PathBuf {
    let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200");
    let bin = dir.join("bin");
    let cuda_bin = dir.join("cuda/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&cuda_bin).unwrap();
    let script = |path: std::path::PathBuf, body: String| {
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        StdCommand::new("chmod").arg("755").arg(&path).status().unwrap();
    };
    let smi = format!(
        "case \"$*\" in *--query-gpu*) cat '{}';; *) cat '{}';; esac\n",
        real.join("nvidia-smi-query.txt").display(),
        real.join("nvidia-smi.txt").display()
    );
    script(bin.join("nvidia-smi"), smi);
    script(
        cuda_bin.join("nvcc"),
        format!("cat '{}'\n", real.join("nvcc-version.txt").display()),
    );
    script(
        bin.join("g++"),
        format!("cat '{}'\n", real.join("gxx-version.txt").display()),
    );
    dir.join("cuda")
}

#[test]
fn doctor_fed_real_h200_tool_outputs_reports_exactly_those_facts_with_their_sources() {
    let w = World::new();
    let cuda_home = h200_tools(&w.dir.path().join("h200"));
    let path = format!("{}:/usr/bin:/bin", w.dir.path().join("h200/bin").display());
    let out = crate::common::kiln_bare()
        .env("PATH", &path)
        .env("CUDA_HOME", &cuda_home)
        .arg("--python")
        .arg(&w.python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .args(["doctor", "--json", "cuda-toolkit"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let m = &v["machine"];
    assert_eq!(m["gpus"], serde_json::json!([{"name": "NVIDIA H200", "arch": "9.0"}]));
    assert_eq!(m["gpu_source"], "nvidia-smi");
    assert_eq!(
        m["driver"],
        serde_json::json!({"value": "580.159.04", "source": "nvidia-smi"})
    );
    assert_eq!(
        m["driver_cuda"],
        serde_json::json!({"value": "13.0.0", "source": "nvidia-smi"})
    );
    assert_eq!(m["cuda_toolkit"]["version"], "13.0.88");
    assert_eq!(m["cuda_toolkit"]["source"], "CUDA_HOME");
    assert_eq!(
        m["host_compiler"]["value"],
        "g++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0"
    );
    assert_eq!(
        m["target_archs"],
        serde_json::json!(["9.0"]),
        "no --arch: the GPUs found"
    );
    assert_eq!(component(&v, "cuda-toolkit")["status"], "ok");
    assert!(out.status.success());
}
