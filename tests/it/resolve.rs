//! The resolver: one version of each component with every constraint satisfied, adopted
//! installs kept, explanations a person can follow, and a way out.

use crate::common::{World, done, kiln_bare, package, sh, stand_in, stdout_json, step, text};

fn versions(v: &serde_json::Value) -> Vec<(String, String)> {
    v["versions"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, x)| (k.clone(), x.as_str().unwrap().to_string()))
        .collect()
}

/// kiln on the embedded recipes, a CUDA 13.0 toolkit named by the override, and a g++ 13.
fn real(w: &World) -> assert_cmd::Command {
    let gxx = w.dir.path().join("g++13");
    std::fs::write(&gxx, "#!/bin/sh\necho 'g++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0'\n").unwrap();
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&gxx)
        .status()
        .unwrap();
    let mut c = kiln_bare();
    // About versions, not wheels: no 336 MB vLLM wheel fetched to judge it.
    c.env("KILN_NO_PREBUILT", "1");
    c.arg("--python")
        .arg(&w.python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .env("KILN_CUDA_VERSION", "13.0")
        .env("CXX", &gxx);
    c
}

/// vLLM 0.20.0 and SGLang 0.5.11: the newest pair that shares one torch and one flashinfer.
const OLDER_PAIR: &[(&str, &str)] = &[
    ("flashinfer", "0.6.8.post1"),
    ("sglang", "0.5.11"),
    ("sglang-kernel", "0.4.2"),
    ("torch", "2.11.0"),
    ("vllm", "0.20.0"),
];

fn assert_versions(v: &serde_json::Value, want: &[(&str, &str)]) {
    let got = versions(v);
    for (name, version) in want {
        assert!(
            got.contains(&(name.to_string(), version.to_string())),
            "{name} {version}: {got:?}"
        );
    }
}

#[test]
fn vllm_and_sglang_share_one_torch_and_fall_back_to_older_versions_around_an_adopted_torch() {
    let w = World::new();
    let plan = |args: &[&str]| {
        real(&w)
            .args(["plan", "--json", "--arch", "12.0"])
            .args(args)
            .output()
            .unwrap()
    };
    // Each alone: its newest version, with the flashinfer its source tree pins.
    assert_versions(
        &stdout_json(&plan(&["vllm"])),
        &[("vllm", "0.33.0"), ("flashinfer", "0.7.2.post1"), ("torch", "2.14.1")],
    );
    assert_versions(
        &stdout_json(&plan(&["sglang"])),
        &[("sglang", "0.5.23"), ("flashinfer", "0.7.2"), ("torch", "2.14.1")],
    );
    // Together, nothing installed: vLLM 0.33.0 pins flashinfer 0.7.2.post1 and SGLang 0.5.23
    // pins 0.7.2 (pip enforces both), so the newest pair cannot share an environment. The solver
    // finds the newest pair that can, one torch, and says why each is not newer.
    let v = stdout_json(&plan(&["vllm", "sglang"]));
    assert_versions(&v, OLDER_PAIR);
    insta::assert_snapshot!(
        "older_vllm_because_of_flashinfer_pins",
        w.redact(step(&v, "vllm")["reason"].as_str().unwrap())
    );
    // Both newest, asked for by name: no solution, and the reasons say which pins collide.
    let out = real(&w)
        .args(["plan", "--arch", "12.0", "vllm==0.33.0", "sglang==0.5.23"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(
        "newest_vllm_and_sglang_pin_two_flashinfers",
        w.redact(&text(&out.stderr))
    );

    // torch 2.11.0 installed: adopted, so SGLang and vLLM take the versions built for it.
    stand_in(&w.python, w.dir.path(), "torch", "2.11.0+cu130", "torch", &[]);
    let out = plan(&["vllm", "sglang"]);
    let v = stdout_json(&out);
    assert_versions(&v, OLDER_PAIR);
    assert_eq!(step(&v, "torch")["action"], "keep");
    let sglang = step(&v, "sglang");
    assert_eq!(sglang["version"], "0.5.11");
    insta::assert_snapshot!("older_sglang_because", w.redact(sglang["reason"].as_str().unwrap()));

    // Asking for the newest SGLang explicitly cannot work with that torch: say why, offer ways out.
    let out = real(&w)
        .args(["plan", "--arch", "12.0", "sglang==0.5.23"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("sglang_0_5_23_with_adopted_torch", w.redact(&text(&out.stderr)));

    // Allowing the replacement gives one consistent plan with torch 2.14.1.
    let v = stdout_json(&plan(&["--allow-replace", "torch", "sglang==0.5.23"]));
    let t = step(&v, "torch");
    assert_eq!(
        (t["action"].as_str(), t["version"].as_str()),
        (Some("reinstall"), Some("2.14.1"))
    );
    assert_eq!(
        t["reason"],
        "replace 2.11.0+cu130 with 2.14.1; 2.14.1, not 2.15.0: sglang 0.5.23 needs torch ==2.14.1; you asked for sglang==0.5.23"
    );
    assert_eq!(step(&v, "sglang")["version"], "0.5.23");
}

#[test]
fn a_user_pin_that_conflicts_with_an_installed_wheels_requires_dist_is_explained() {
    let w = World::new();
    stand_in(&w.python, w.dir.path(), "torch", "2.14.1", "torch", &[]);
    stand_in(
        &w.python,
        w.dir.path(),
        "sglang-kernel",
        "0.4.10",
        "sgl_kernel",
        // The line for this platform binds; those for another platform or an extra do not.
        &[
            "torch==2.14.1 ; sys_platform == 'linux'",
            "torch<2 ; sys_platform == 'win32'",
            "torch<2 ; extra == 'old'",
        ],
    );
    let out = real(&w)
        .args(["plan", "--json", "--arch", "12.0", "torch"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert_eq!(v["versions"]["torch"].as_str(), Some("2.14.1"), "{v}");
    let out = real(&w)
        .args(["plan", "--arch", "12.0", "torch==2.11.0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("pin_against_installed_requires_dist", w.redact(&text(&out.stderr)));
    let out = real(&w)
        .args(["plan", "--json", "--arch", "12.0", "torch==2.11.0"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert!(
        v["conflict"]["because"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "sglang-kernel 0.4.10 is installed, and its metadata requires torch ==2.14.1")
    );
    // Taking the first way out: the installed sglang-kernel moves to the version built for 2.11.
    let out = real(&w)
        .args([
            "plan",
            "--json",
            "--arch",
            "12.0",
            "--allow-replace",
            "sglang-kernel",
            "torch==2.11.0",
        ])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let k = step(&v, "sglang-kernel");
    assert_eq!(
        (k["action"].as_str(), k["version"].as_str()),
        (Some("rebuild"), Some("0.4.2")),
        "{v}"
    );
    let t = step(&v, "torch");
    assert_eq!(
        (t["action"].as_str(), t["version"].as_str()),
        (Some("reinstall"), Some("2.11.0"))
    );
}

#[test]
fn an_allowed_torch_upgrade_rebuilds_exactly_its_abi_dependents() {
    let w = World::new();
    let r = w.dir.path().join("abi");
    let p = w.dir.path().join("abi-packages");
    std::fs::create_dir_all(&r).unwrap();
    let recipe = |name: &str, versions: &[&str], deps: &str| {
        let mut s = format!(
            "[package]\nname = \"{name}\"\ndist = \"kiln-{name}\"\n[depends]\n{deps}\n[verify]\nimports = [\"kiln_{}\"]\n",
            name.replace('-', "_")
        );
        for v in versions {
            s += &format!(
                "[[versions]]\nversion = \"{v}\"\npath = \"{}\"\n",
                package(&p, &format!("kiln-{name}"), v)
            );
        }
        std::fs::write(r.join(format!("{name}.toml")), s).unwrap();
    };
    recipe("torch", &["2.14.1", "2.11.0"], "");
    recipe("ext-a", &["1.0.0"], "torch = { version = \">=2.11\", abi = true }");
    recipe("ext-b", &["1.0.0"], "torch = { version = \">=2.11\", abi = true }");
    recipe("pure", &["1.0.0"], "torch = \">=2.11\"");
    recipe("other", &["1.0.0"], "");
    let kiln = |args: &[&str]| w.kiln_with(&r).args(args).output().unwrap();
    // Start from torch 2.11.0 (a stand-in distribution `kiln-torch`, built from source here).
    let out = kiln(&["install", "--json", "torch==2.11.0", "ext-a", "ext-b", "pure", "other"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(done(&out).len(), 5);
    // Not named, torch is adopted: nothing changes even though 2.14.1 exists.
    let v = stdout_json(&kiln(&["plan", "--json", "ext-a", "ext-b", "pure", "other"]));
    assert!(
        v["steps"].as_array().unwrap().iter().all(|s| s["action"] == "keep"),
        "{v}"
    );
    // Allowed: torch goes to 2.14.1 and exactly the two ABI dependents are rebuilt (pure, which
    // uses torch without linking against it, and other are kept).
    let allowed = ["--json", "--allow-replace", "torch", "ext-a", "ext-b", "pure", "other"];
    let v = stdout_json(&kiln(&[&["plan"][..], &allowed].concat()));
    let changing: Vec<(&str, &str)> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["action"] != "keep")
        .map(|s| (s["name"].as_str().unwrap(), s["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        changing,
        [("torch", "rebuild"), ("ext-a", "rebuild"), ("ext-b", "rebuild")]
    );
    assert_eq!(
        step(&v, "ext-a")["reason"],
        "built against torch, which this plan replaces (abi = true)"
    );
    let out = kiln(&[&["install"][..], &allowed].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rebuilt = done(&out);
    assert_eq!(rebuilt, ["torch", "ext-a", "ext-b"]);
    assert_eq!(rebuilt.len() - 1, 2, "two ABI dependents");
    assert_eq!(
        w.py("import importlib.metadata as m; print(m.version('kiln-torch'))")
            .unwrap(),
        "2.14.1"
    );
}

#[test]
fn versioned_recipes_still_report_unknown_dependencies_and_cycles() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("v");
    std::fs::create_dir(&dir).unwrap();
    let r = |name: &str, dep: &str| {
        format!(
            "[package]\nname = \"{name}\"\n[[versions]]\nversion = \"2\"\npath = \".\"\ndepends = {{ {dep} = \">=1\" }}\n[[versions]]\nversion = \"1\"\npath = \".\"\n"
        )
    };
    std::fs::write(dir.join("a.toml"), r("a", "b")).unwrap();
    std::fs::write(dir.join("b.toml"), r("b", "a")).unwrap();
    let errors = || {
        let out = kiln_bare()
            .current_dir(tmp.path())
            .args(["recipes", "--recipes", "v"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        text(&out.stderr)
    };
    insta::assert_snapshot!("versioned_cycle", errors());
    std::fs::write(dir.join("b.toml"), r("b", "nope")).unwrap();
    insta::assert_snapshot!("versioned_unknown_dependency", errors());
}

/// The lines of `kiln plan`'s conflict on stderr that start with `  - ` (reasons and ways out).
fn bullets(stderr: &str) -> Vec<&str> {
    stderr.lines().filter_map(|l| l.strip_prefix("  - ")).collect()
}

/// The first way out's command, run as the user would (its words split where the shell would:
/// the test's paths hold no spaces or quotes).
fn take_way_out(v: &serde_json::Value) -> std::process::Output {
    let cmd = v["conflict"]["ways_out"][0]["command"].as_str().unwrap();
    let words: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(words[0], "kiln", "{cmd}");
    let mut c = crate::common::kiln_bare();
    // As `real`: about versions, not wheels (the sglang-kernel wheel is 373 MB, and on a machine
    // without a driver its binaries could not be proven anyway).
    c.env("KILN_CUDA_VERSION", "13.0").env("KILN_NO_PREBUILT", "1");
    c.args(&words[1..]).output().unwrap()
}

#[test]
fn a_conflict_over_an_installed_torch_and_flashinfer_is_explained_per_version_with_a_way_out_that_works() {
    // The environment: flashinfer 0.7.4 over torch 2.15.0 (stand-ins with real metadata).
    let w = World::new();
    stand_in(&w.python, w.dir.path(), "torch", "2.15.0+cu132", "torch", &[]);
    stand_in(
        &w.python,
        w.dir.path(),
        "flashinfer-python",
        "0.7.4",
        "flashinfer",
        &["torch", "nvidia-cutlass-dsl>=4.8.0"],
    );
    let plan = |args: &[&str]| real(&w).arg("plan").args(args).output().unwrap();
    // What each SGLang version pins, as its recipe says (no version is lumped with another).
    let set = kiln::recipe::RecipeSet::embedded().unwrap();
    let sglang = set.get("sglang").unwrap();
    let pin = |v: &str, dep: &str| {
        let e = sglang.versions.iter().find(|e| e.version.to_string() == v).unwrap();
        let d = e.depends.iter().find(|d| d.name == dep).unwrap();
        format!("sglang {v} needs {dep} {}", d.version.as_deref().unwrap())
    };

    let out = plan(&["--arch", "12.0", "sglang"]);
    assert_eq!(out.status.code(), Some(1));
    let err = w.redact(&text(&out.stderr));
    let lines = bullets(&err);
    assert!(lines.contains(&pin("0.5.23", "torch").as_str()), "{err}");
    assert!(lines.contains(&pin("0.5.11", "torch").as_str()), "{err}");
    assert!(!err.contains(" or 0.5.11"), "{err}");
    assert!(!err.contains("no way out"), "{err}");
    insta::assert_snapshot!("sglang_over_torch_2_15_and_flashinfer_0_7_4", err);
    // The way out lets both move; taking it gives a plan.
    let v = stdout_json(&plan(&["--json", "--arch", "12.0", "sglang"]));
    assert_eq!(
        v["conflict"]["ways_out"][0]["allow_replace"],
        serde_json::json!(["flashinfer", "torch"])
    );
    let taken = take_way_out(&v);
    assert!(taken.status.success(), "{}", text(&taken.stderr));

    // The user allowed torch: the way out keeps that flag and every other one.
    let args = ["--arch", "12.0", "--allow-replace", "torch", "sglang"];
    let out = plan(&args);
    assert_eq!(out.status.code(), Some(1));
    let err = w.redact(&text(&out.stderr));
    assert!(bullets(&err).contains(&pin("0.5.23", "flashinfer").as_str()), "{err}");
    assert!(bullets(&err).contains(&pin("0.5.11", "flashinfer").as_str()), "{err}");
    insta::assert_snapshot!("sglang_with_torch_allowed_over_flashinfer_0_7_4", err);
    let v = stdout_json(&plan(&[&["--json"][..], &args].concat()));
    let cmd = v["conflict"]["ways_out"][0]["command"].as_str().unwrap();
    for flag in [
        "--arch 12.0",
        "--allow-replace torch",
        "--allow-replace flashinfer",
        "--json",
        "sglang",
    ] {
        assert!(cmd.contains(flag), "{flag} is kept: {cmd}");
    }
    let taken = take_way_out(&v);
    assert!(taken.status.success(), "{}", text(&taken.stderr));
    assert_eq!(step(&stdout_json(&taken), "torch")["version"], "2.14.1");
}

#[test]
fn no_way_out_is_said_only_after_a_second_solve_found_none() {
    let w = World::new();
    let r = w.dir.path().join("stuck");
    std::fs::create_dir_all(&r).unwrap();
    let recipe = |name: &str, deps: &str| {
        let text = format!(
            "[package]\nname = \"{name}\"\ndist = \"kiln-{name}\"\nversion = \"1.0\"\n[source]\nwheel = \"kiln-{name}==1.0\"\n[depends]\n{deps}\n"
        );
        std::fs::write(r.join(format!("{name}.toml")), text).unwrap();
    };
    // app 1.0 needs lib 1.0 and other 1.0, which needs lib 2.0: the recipes disagree.
    recipe("app", "lib = \"==1.0\"\nother = \"==1.0\"");
    recipe("other", "lib = \"==2.0\"");
    recipe("lib", "");
    let plan = |args: &[&str]| w.kiln_with(&r).arg("plan").args(args).output().unwrap();
    let out = plan(&["app"]);
    assert_eq!(out.status.code(), Some(1));
    let err = w.redact(&text(&out.stderr));
    assert!(!err.contains("ways out"), "{err}");
    insta::assert_snapshot!("recipes_disagree_nothing_to_relax", err);

    // lib 1.5 installed and adopted: allowing its replacement is tried, and does not help.
    stand_in(&w.python, w.dir.path(), "kiln-lib", "1.5", "kiln_lib", &[]);
    let out = plan(&["app"]);
    assert_eq!(out.status.code(), Some(1));
    let err = w.redact(&text(&out.stderr));
    assert!(!err.contains("ways out"), "{err}");
    insta::assert_snapshot!("recipes_disagree_replacing_tried", err);
    let v = stdout_json(&plan(&["--json", "app"]));
    let tried = v["conflict"]["tried"].as_array().unwrap();
    assert!(tried.iter().any(|t| t == "--allow-replace lib"), "{v}");
    // Solving again as it says gives the same answer: no solution.
    let out = plan(&["--allow-replace", "lib", "app"]);
    assert_eq!(out.status.code(), Some(1));
}

/// `kiln plan 'vllm==0.26.0' --arch 12.0 --json` on the embedded recipe: every build input with
/// its pinned identity (ground truth: the commits and sha256 the recipe names, which
/// recipe_draft checks against the 0.26.0 sdist's CMake files), and its own compiler floor:
/// "GCC >= 11.3 is required to build vLLM" (0.26.0 CMakeLists.txt:23-27), so a g++ 12 builds
/// it, where 0.33.0 (>= 13, the recipe-wide floor) is blocked.
#[test]
fn vllm_0_26_0_plans_every_input_with_its_pin_and_builds_with_gcc_12() {
    let w = World::new();
    let gxx = w.dir.path().join("g++12");
    std::fs::write(&gxx, "#!/bin/sh\necho 'g++ (Debian 12.2.0-14) 12.2.0'\n").unwrap();
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&gxx)
        .status()
        .unwrap();
    let plan = |pin: &str| {
        let out = real(&w)
            .env("CXX", &gxx)
            .args(["plan", "--json", "--arch", "12.0", pin])
            .output()
            .unwrap();
        assert!(out.status.code().is_some(), "{}", text(&out.stderr));
        stdout_json(&out)
    };
    let v = plan("vllm==0.26.0");
    let s = step(&v, "vllm");
    assert_eq!(s["action"], "build", "{s}");
    assert_eq!(s["version"], "0.26.0");
    let inputs = s["inputs"].as_array().unwrap();
    let pin = |name: &str| {
        let i = inputs
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {s}"));
        (
            i["rev"].as_str().or(i["sha256"].as_str()).unwrap().to_string(),
            i.clone(),
        )
    };
    let wheel_sha = "adb1e4c9b46d0dfdb094121ae5aad670a42412dd813ed4e5db069ed6a15006de";
    for (name, want) in [
        ("cutlass", "da5e086dab31d63815acafdac9a9c5893b1c69e2"),
        ("triton-kernels", "0b64adb082be0008f14622b2f3a29aaae03412ed"),
        ("deepgemm", "a6b593d2826719dcf4892609af7b84ee23aaf32a"),
        ("qutlass", "830d2c4537c7396e14a02a46fbddd18b5d107c65"),
        ("vllm-flash-attn", "caaa4eb59845388a20b1f435ecaafb4bd9517ad8"),
        ("flashmla", wheel_sha),
        ("fmha-sm100", wheel_sha),
        ("tml-fa4", wheel_sha),
    ] {
        assert_eq!(pin(name).0, want, "{name}");
    }
    assert_eq!(inputs.len(), 8, "{s}");
    assert_eq!(pin("fmha-sm100").1["place"], "python/fmha_sm100/");
    assert_eq!(s["env"]["FMHA_SM100_SRC_DIR"], "<input fmha-sm100>", "{s}");
    assert_eq!(s["network"], "denied");
    // The targets it compiles for 12.0, per the arch lists of its CMake files (the recipe's
    // `[[versions.targets]]`, which recipe_draft checks against the sdist's setup.py): the
    // generic kernels as sm_120 and the SM12x families as sm_120f, FA2 only as compute_80 PTX,
    // FA3 compiled with nothing for 12.0 (no upstream switch), FlashMLA left out.
    let target = |s: &serde_json::Value, name: &str| {
        s["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no target {name}: {s}"))
            .clone()
    };
    let images = |t: &serde_json::Value| t["code_for"][0]["images"].clone();
    let c = target(s, "_C_stable_libtorch");
    assert_eq!(c["outcome"], "compiled", "{c}");
    assert_eq!(images(&c), serde_json::json!(["sm_120", "sm_120f"]), "{c}");
    assert_eq!(images(&target(s, "_qutlass_C")), serde_json::json!(["sm_120f"]));
    assert_eq!(images(&target(s, "_vllm_fa2_C")), serde_json::json!(["compute_80"]));
    let fa3 = target(s, "_vllm_fa3_C");
    assert_eq!(fa3["outcome"], "compiled-for-nothing", "{fa3}");
    assert_eq!(fa3["no_code_for"], serde_json::json!(["12.0"]));
    assert!(fa3["why"].as_str().unwrap().contains("setup.py:1133-1137"), "{fa3}");
    assert_eq!(target(s, "_flashmla_C")["outcome"], "skipped");
    assert_eq!(target(s, "cumem_allocator")["outcome"], "host");
    assert_eq!(target(s, "tml_fa4")["outcome"], "files");
    // The text plan names each input with its pin and each target with what it compiles.
    let out = real(&w)
        .env("CXX", &gxx)
        .args(["plan", "--arch", "12.0", "vllm==0.26.0"])
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert!(shown.contains("input cutlass"), "{shown}");
    assert!(shown.contains("@ da5e086dab31 (v4.4.2)"), "{shown}");
    assert!(shown.contains("_C_stable_libtorch"), "{shown}");
    assert!(shown.contains("compiled, 12.0: sm_120, sm_120f"), "{shown}");
    assert!(shown.contains("compiled with no kernel for 12.0"), "{shown}");
    // Built for 9.0 too, FA3 holds sm_90a and FlashMLA is compiled.
    let out = real(&w)
        .env("CXX", &gxx)
        .args(["plan", "--json", "--arch", "9.0,12.0", "vllm==0.26.0"])
        .output()
        .unwrap();
    let both = stdout_json(&out);
    let both = step(&both, "vllm");
    let fa3 = target(both, "_vllm_fa3_C");
    assert_eq!(fa3["outcome"], "compiled", "{fa3}");
    assert_eq!(
        fa3["code_for"],
        serde_json::json!([{"arch": "9.0", "images": ["sm_90a"]}])
    );
    assert_eq!(target(both, "_flashmla_C")["outcome"], "compiled");
    // With the toolkit under CUDA_HOME alone, the build finds its nvcc first on PATH too:
    // CMake's FindCUDA (torch's Caffe2/public/cuda.cmake) ignores CUDA_HOME, and the real
    // 0.26.0 configure failed without it (docs/gpu-proof.md §17, "CUDA_TOOLKIT_ROOT_DIR not
    // found or specified").
    let home = w.dir.path().join("cuda-home");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    std::fs::write(
        home.join("bin/nvcc"),
        "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n",
    )
    .unwrap();
    sh(&home, &["chmod", "755", "bin/nvcc"]);
    let out = w
        .kiln_with(&w.dir.path().join("fixtures/cuda-recipes"))
        .env("CUDA_HOME", &home)
        .env_remove("KILN_CUDA_VERSION")
        .args(["plan", "--json", "--arch", "12.0", "fixture-cuda"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let env = &step(&v, "fixture-cuda")["env"];
    assert_eq!(env["CUDA_HOME"], home.display().to_string(), "{v}");
    assert_eq!(env["PATH"], format!("{}/bin:$PATH", home.display()), "{v}");
    // The same g++ 12 is below 0.33.0's floor.
    let v = plan("vllm==0.33.0");
    let s = step(&v, "vllm");
    assert_eq!(s["action"], "blocked", "{s}");
    assert!(s["reason"].as_str().unwrap().contains(">=13"), "{s}");
}
