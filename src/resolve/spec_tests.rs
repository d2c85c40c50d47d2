use super::*;
use crate::arch::Arch;

fn t(s: &str) -> Template {
    Template::parse(s).unwrap()
}

fn vars(jobs: usize) -> Vars {
    Vars {
        python: "/v/bin/python".into(),
        src: "never read".into(),
        wheel_dir: "never read".into(),
        jobs,
        version: "1.2.3".into(),
        cuda_home: Some("/usr/local/cuda".into()),
        cuda_version: Some(semver::Version::new(13, 0, 0)),
        archs: vec![Arch { major: 12, minor: 0 }],
    }
}

#[test]
fn the_plan_renders_what_it_knows_and_the_run_fills_in_the_rest() {
    let build = Build {
        requires: vec!["setuptools>=77".into()],
        env: [
            ("ARCHS".to_string(), t("{arch.flashinfer}")),
            ("MAX_JOBS".to_string(), t("{jobs}")),
            ("OUT".to_string(), t("{wheel_dir}/x-{version}")),
        ]
        .into(),
        prepare: vec![vec![t("{python}"), t("{src}/tools/prep.py"), t("-j{jobs}")]],
        wheel: None,
        memory_per_job: Some(8 << 30),
        cargo_manifest: None,
        stall: None,
        limit: None,
        inputs: Vec::new(),
        targets: Vec::new(),
        network: None,
    };
    let spec = BuildSpec::new(&build, &vars(6)).unwrap();
    assert_eq!(spec.jobs, 6);
    assert_eq!(spec.memory_per_job, Some(8 << 30));
    let shown = spec.shown_env();
    assert_eq!(shown["ARCHS"], "12.0f");
    assert_eq!(shown["MAX_JOBS"], "6");
    assert_eq!(shown["OUT"], "<wheel dir>/x-1.2.3");
    assert_eq!(shown["PYTHONPATH"], "<build requirements>");
    // The toolkit kiln judged comes next: FindCUDA looks for nvcc on PATH, not CUDA_HOME.
    assert_eq!(shown["PATH"], "<build requirements>/bin:/usr/local/cuda/bin:$PATH");
    assert_eq!(shown["CUDA_HOME"], "/usr/local/cuda");

    let run = RunValues {
        src: "/w/src".into(),
        wheel_dir: "/w/wheel".into(),
        overlay: "/w/req".into(),
        jobs: 3,
        inherited: [("PATH".to_string(), "/usr/bin".to_string())].into(),
        front_end: "/w/kiln_build_wheel.py".into(),
        compile_cache: None,
        inputs: BTreeMap::new(),
        gate: None,
    };
    let env = spec.env_with(&run);
    assert_eq!(env["MAX_JOBS"], "3");
    assert_eq!(env["OUT"], "/w/wheel/x-1.2.3");
    assert_eq!(env["PATH"], "/w/req/bin:/usr/local/cuda/bin:/usr/bin");
    assert_eq!(
        BuildSpec::argv(&spec.prepare[0], &run),
        ["/v/bin/python", "/w/src/tools/prep.py", "-j3"]
    );
    assert_eq!(
        BuildSpec::argv(&spec.wheel, &run),
        ["/v/bin/python", "/w/kiln_build_wheel.py", "/w/wheel", "/w/src"]
    );
    let json = serde_json::to_value(&spec).unwrap();
    assert_eq!(json["env"]["MAX_JOBS"], "6");
    assert!(json.get("compile_cache").is_none());
    assert!(!shown.contains_key("SCCACHE_SERVER_UDS"));
    assert_eq!(json["jobs"], 6);
    assert_eq!(json["prepare"][0][2], "-j6");
    assert_eq!(json["wheel_command"][1], "<kiln's PEP 517 front end>");
    assert_eq!(json["wheel_command"][2], "<wheel dir>");
}

#[test]
fn the_compile_cache_joins_the_env_the_plan_shows_and_the_run_fills_its_socket_in() {
    let build = Build {
        env: [
            ("PYTORCH_NVCC".to_string(), t("mine")),
            ("CXX".to_string(), t("g++-12")),
        ]
        .into(),
        ..Build::default()
    };
    let mut spec = BuildSpec::new(&build, &vars(2)).unwrap();
    let wiring = Wiring {
        sccache: "/c/sccache".into(),
        nvcc: Some("/cuda/bin/nvcc".into()),
        cxx_launcher: "/k/tools/launchers/g++".into(),
        cxx: None,
    };
    spec.compile_cache = Some(("redis://cache:6379".into(), wiring));
    let shown = spec.shown_env();
    assert_eq!(shown["SCCACHE_SERVER_UDS"], "<sccache socket>");
    assert_eq!(shown["CMAKE_CUDA_COMPILER_LAUNCHER"], "/c/sccache");
    assert_eq!(shown["PYTORCH_NVCC"], "mine", "the recipe's value wins");
    // The recipe's C++ compiler runs behind the launcher.
    assert_eq!(
        (shown["CXX"].as_str(), shown["KILN_CXX"].as_str()),
        ("/k/tools/launchers/g++", "g++-12")
    );
    assert_eq!(
        serde_json::to_value(&spec).unwrap()["compile_cache"],
        "redis://cache:6379"
    );
    let mut run = RunValues::placeholders(2);
    run.compile_cache = Some(("/tmp/s.sock".into(), false));
    let env = spec.env_with(&run);
    assert_eq!(env["SCCACHE_SERVER_UDS"], "/tmp/s.sock");
    assert!(!env.contains_key("CMAKE_CUDA_COMPILER_LAUNCHER"));
    run.compile_cache = None;
    assert!(!spec.env_with(&run).contains_key("SCCACHE_SERVER_UDS"));
    assert_eq!(
        spec.env_with(&run)["CXX"],
        "g++-12",
        "no compile cache: the recipe's own"
    );
}

#[test]
fn a_value_this_machine_cannot_know_is_an_error_naming_where() {
    let mut v = vars(1);
    v.cuda_version = None;
    let env = Build {
        env: [("ARCHS".to_string(), t("{arch.flashinfer}"))].into(),
        ..Build::default()
    };
    let e = BuildSpec::new(&env, &v).unwrap_err();
    assert!(matches!(&e, SpecError::Env { key, .. } if key == "ARCHS"));
    assert!(e.to_string().starts_with("cannot set ARCHS: spelling 12.0"), "{e}");
    let wheel = Build {
        wheel: Some(vec![t("x"), t("{arch.cmake}")]),
        ..Build::default()
    };
    assert!(matches!(BuildSpec::new(&wheel, &v), Err(SpecError::Wheel(_))));
}

#[test]
fn the_memory_gate_goes_in_front_of_nvcc_and_of_sccache_unless_the_recipe_names_the_compiler() {
    let mut spec = BuildSpec::new(&Build::default(), &vars(2)).unwrap();
    spec.nvcc = Some("/cuda/bin/nvcc".into());
    let mut run = RunValues::placeholders(2);
    run.compile_cache = None;
    run.gate = Some(("/k/kiln".into(), "/w/gate".into()));
    let env = spec.env_with(&run);
    assert_eq!(env["PYTORCH_NVCC"], "/k/kiln gate -- /cuda/bin/nvcc");
    assert_eq!(env["CMAKE_CUDA_COMPILER_LAUNCHER"], "/k/kiln;gate;--");
    assert_eq!(env[GATE_VAR], "/w/gate");
    // Behind the gate, sccache where it can wrap this nvcc; not where it cannot.
    spec.compile_cache = Some((
        "redis://cache:6379".into(),
        Wiring {
            sccache: "/c/sccache".into(),
            nvcc: Some("/cuda/bin/nvcc".into()),
            cxx_launcher: "/k/tools/launchers/g++".into(),
            cxx: None,
        },
    ));
    run.compile_cache = Some(("/tmp/s.sock".into(), true));
    let env = spec.env_with(&run);
    assert_eq!(env["PYTORCH_NVCC"], "/k/kiln gate -- /c/sccache /cuda/bin/nvcc");
    assert_eq!(env["CMAKE_CUDA_COMPILER_LAUNCHER"], "/k/kiln;gate;--;/c/sccache");
    run.compile_cache = Some(("/tmp/s.sock".into(), false));
    assert_eq!(spec.env_with(&run)["PYTORCH_NVCC"], "/k/kiln gate -- /cuda/bin/nvcc");
    // A path with a space stays one word for the shell that runs ninja's commands.
    run.gate = Some(("/home/a b/kiln".into(), "/w/gate".into()));
    assert_eq!(
        spec.env_with(&run)["PYTORCH_NVCC"],
        "'/home/a b/kiln' gate -- /cuda/bin/nvcc"
    );
    // No gate for the run (or no nvcc): nothing of it in the environment.
    run.gate = None;
    assert!(!spec.env_with(&run).contains_key(GATE_VAR));
    // The recipe's own compiler wins.
    let build = Build {
        env: [("PYTORCH_NVCC".to_string(), t("mine"))].into(),
        ..Build::default()
    };
    let mut mine = BuildSpec::new(&build, &vars(2)).unwrap();
    mine.nvcc = spec.nvcc.clone();
    run.gate = Some(("/k/kiln".into(), "/w/gate".into()));
    run.compile_cache = None;
    assert_eq!(mine.env_with(&run)["PYTORCH_NVCC"], "mine");
    assert_eq!(mine.memory(), None);
    mine.memory_per_job = Some(3);
    assert_eq!(mine.memory(), Some(6), "jobs times the figure per job");
    mine.memory_limit = Some(4);
    assert_eq!(mine.memory(), Some(4), "the gate's limit");
}
