//! The fixture stack (pure Python, a C extension built by gcc, an app depending on both) built
//! from source into fresh virtualenvs.

use std::process::Command as StdCommand;

use crate::common::{World, stdout_json, step, text};

fn statuses(w: &World) -> Vec<(String, String, Option<String>)> {
    let out = w.kiln().args(["doctor", "--json"]).output().unwrap();
    let v = stdout_json(&out);
    v["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["version"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn actions(w: &World) -> Vec<(String, String)> {
    let out = w.kiln().args(["plan", "--json"]).output().unwrap();
    stdout_json(&out)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["action"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn first_install_builds_all_three_and_a_second_builds_nothing() {
    let w = World::new();
    assert_eq!(
        actions(&w),
        pairs(&[
            ("fixture-cext", "build"),
            ("fixture-pure", "build"),
            ("fixture-app", "build")
        ])
    );
    let out = w.kiln().args(["install", "--json", "fixture-app"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let done = crate::common::done(&out);
    assert_eq!(done, ["fixture-cext", "fixture-pure", "fixture-app"]);
    // Built from source by the system compiler: the extension is a real shared object that runs.
    assert_eq!(
        w.py("import kiln_fixture_app; print(kiln_fixture_app.run())").unwrap(),
        "hello, 42"
    );
    let so = w
        .py("import kiln_fixture_cext._speedups as m; print(m.__file__)")
        .unwrap();
    assert!(so.ends_with(".so"), "{so}");
    // Proven builds leave no build trees behind: the wheels are in the wheel cache.
    let left: Vec<_> = std::fs::read_dir(w.cache.join("work"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "build trees left: {left:?}");

    let again = w.kiln().args(["install", "fixture-app"]).output().unwrap();
    assert!(again.status.success());
    assert_eq!(
        text(&again.stdout).trim(),
        "nothing to do: all 3 components are ok; built nothing"
    );
    assert!(
        statuses(&w)
            .iter()
            .all(|(_, s, v)| s == "ok" && v.as_deref() == Some("1.0.0"))
    );
    let doctor = w.kiln().arg("doctor").output().unwrap();
    assert!(doctor.status.success());
    assert!(
        text(&doctor.stdout).contains("imports ran: kiln_fixture_cext"),
        "{}",
        text(&doctor.stdout)
    );
}

#[test]
fn deleted_module_is_broken_with_the_import_error_and_only_it_is_rebuilt() {
    let w = World::new();
    assert!(w.kiln().arg("install").output().unwrap().status.success());
    let pkg = w.site_packages().join("kiln_fixture_cext");
    let so = std::fs::read_dir(&pkg)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "so"))
        .unwrap();
    std::fs::remove_file(&so).unwrap();

    let out = w.kiln().args(["doctor", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "doctor exits 1 when something is not ok");
    let v = stdout_json(&out);
    let cext = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "fixture-cext")
        .unwrap();
    assert_eq!(cext["status"], "broken");
    assert_eq!(cext["version"], "1.0.0");
    assert_eq!(
        cext["evidence"],
        "import kiln_fixture_cext._speedups failed: ModuleNotFoundError: No module named 'kiln_fixture_cext._speedups'"
    );
    assert_eq!(
        actions(&w),
        pairs(&[
            ("fixture-cext", "rebuild"),
            ("fixture-pure", "keep"),
            ("fixture-app", "keep")
        ])
    );
    let out = w.kiln().args(["install", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let done = crate::common::done(&out);
    assert_eq!(done, ["fixture-cext"]);
    assert!(statuses(&w).iter().all(|(_, s, _)| s == "ok"));
}

/// A world with the fixture stack installed at 1.0.0, whose fixture-cext recipe and source now
/// say 1.1.0 (so the installed one is outdated and `install` rebuilds it).
fn installed_with_cext_1_1_0_pending() -> World {
    let w = World::new();
    assert!(w.kiln().arg("install").output().unwrap().status.success());
    w.edit(
        "recipes/fixture-cext.toml",
        "version = \"1.0.0\"",
        "version = \"1.1.0\"",
    );
    w.edit(
        "packages/kiln-fixture-cext/pyproject.toml",
        "version = \"1.0.0\"",
        "version = \"1.1.0\"",
    );
    w
}

#[test]
fn failed_build_leaves_the_previous_version_importable() {
    let w = installed_with_cext_1_1_0_pending();
    // A new version whose C code does not compile.
    w.edit(
        "packages/kiln-fixture-cext/kiln_fixture_cext/_speedups.c",
        "return PyLong_FromLong(a + b);",
        "return PyLong_FromLong(a + b) this is not C;",
    );
    assert_eq!(actions(&w)[0], ("fixture-cext".to_string(), "rebuild".to_string()));

    let out = w.kiln().arg("install").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("error: fixture-cext failed during wheel"), "{err}");
    assert!(
        err.contains("  command: ") && err.contains("/kiln_build_wheel.py "),
        "{err}"
    );
    assert!(err.contains("  status:  exit status 1"), "{err}");
    assert!(
        err.contains("  log:     ") && err.contains("fixture-cext.wheel.log"),
        "{err}"
    );
    assert!(
        err.contains("environment: nothing was installed; the environment is unchanged"),
        "{err}"
    );
    let log_line = err.lines().find(|l| l.trim_start().starts_with("log:")).unwrap();
    let log = std::fs::read_to_string(log_line.trim_start().trim_start_matches("log:").trim()).unwrap();
    assert!(log.contains("this is not C"), "the log holds the compiler's output");
    assert!(
        log.lines().any(|l| l.contains("gcc") && l.contains("_speedups.c")),
        "the backend's output, compiler command lines included, is in the log"
    );
    // The compiler's error is named, not only pip's last lines.
    let cause = err
        .lines()
        .skip_while(|l| !l.contains("cause (from the log):"))
        .nth(1)
        .unwrap_or_else(|| panic!("no cause lines: {err}"));
    assert!(cause.contains("_speedups.c") && cause.contains("error"), "{err}");
    // The failed build's tree stays, for whoever debugs it.
    let kept = std::fs::read_dir(w.cache.join("work"))
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("fixture-cext-") && e.path().join("src").is_dir());
    assert!(kept, "the failed build's source tree is kept");

    assert_eq!(
        w.py(
            "import kiln_fixture_cext, kiln_fixture_cext._speedups as m; print(kiln_fixture_cext.VERSION, m.add(1, 2))"
        )
        .unwrap(),
        "1.0.0 3"
    );
    let st = statuses(&w);
    assert_eq!(
        st[0],
        (
            "fixture-cext".to_string(),
            "outdated".to_string(),
            Some("1.0.0".to_string())
        )
    );
}

#[test]
fn failed_verification_restores_the_previous_install() {
    let w = installed_with_cext_1_1_0_pending();
    // A new version that builds and installs but cannot be imported.
    w.edit(
        "packages/kiln-fixture-cext/kiln_fixture_cext/__init__.py",
        "VERSION = \"1.0.0\"",
        "VERSION = \"1.1.0\"\nraise ImportError('kiln fixture 1.1.0 is broken on purpose')",
    );

    let out = w.kiln().arg("install").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("error: fixture-cext failed during verify"), "{err}");
    assert!(
        err.contains("ImportError: kiln fixture 1.1.0 is broken on purpose"),
        "{err}"
    );
    assert!(
        err.contains("environment: the previous kiln-fixture-cext was restored"),
        "{err}"
    );

    assert_eq!(
        w.py(
            "import kiln_fixture_cext, kiln_fixture_cext._speedups as m; print(kiln_fixture_cext.VERSION, m.add(2, 2))"
        )
        .unwrap(),
        "1.0.0 4"
    );
    assert_eq!(
        w.py("import importlib.metadata as m; print(m.version('kiln-fixture-cext'))")
            .unwrap(),
        "1.0.0"
    );
    assert_eq!(statuses(&w)[0].1, "outdated");
}

#[test]
fn relative_python_and_cache_paths_are_taken_from_where_kiln_was_started() {
    let w = World::new();
    // Builds run in their own directories; paths given relative to the caller must still work.
    let out = crate::common::kiln_bare()
        .current_dir(w.dir.path())
        .args([
            "--recipes",
            "fixtures/recipes",
            "--python",
            "venv/bin/python",
            "--cache-dir",
            "relative-cache",
            "--no-progress",
            "install",
            "fixture-cext",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(w.dir.path().join("relative-cache/logs").is_dir());
    assert_eq!(
        w.py("import kiln_fixture_cext._speedups as s; print(s.__name__)")
            .unwrap(),
        "kiln_fixture_cext._speedups"
    );
}

#[test]
fn a_second_venv_sharing_the_cache_installs_the_verified_wheels_without_compiling() {
    let w = World::new();
    let out = w.kiln().args(["install"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    let from_cache = |python: &std::path::Path| {
        let out = w.kiln_for(python).args(["install", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v = stdout_json(&out);
        let logs = std::path::PathBuf::from(v["logs"].as_str().unwrap());
        let cached: Vec<(String, bool)> = v["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["name"].as_str().unwrap().to_string(), o["from_cache"] == true))
            .collect();
        (cached, logs)
    };
    // Same sources, same interpreter: every wheel comes from the cache and no compiler runs.
    let second = crate::common::venv(&w.dir.path().join("second"));
    let (cached, logs) = from_cache(&second);
    let expected = |cext: bool| {
        [("fixture-cext", cext), ("fixture-pure", true), ("fixture-app", true)].map(|(n, c)| (n.to_string(), c))
    };
    assert_eq!(cached, expected(true));
    assert!(!logs.join("fixture-cext.wheel.log").exists());
    let speedups = std::process::Command::new(&second)
        .args(["-c", "import kiln_fixture_cext._speedups"])
        .status()
        .unwrap();
    assert!(speedups.success());

    // A changed C source is another binary: only that one is compiled again.
    w.edit(
        "packages/kiln-fixture-cext/kiln_fixture_cext/_speedups.c",
        "#include",
        "/* changed */\n#include",
    );
    let third = crate::common::venv(&w.dir.path().join("third"));
    let (cached, logs) = from_cache(&third);
    assert_eq!(cached, expected(false));
    assert!(logs.join("fixture-cext.wheel.log").exists());
}

#[test]
fn a_compile_killed_for_memory_is_retried_with_fewer_jobs_and_says_so() {
    let w = World::new();
    let recipes = w.dir.path().join("fixtures/oom-recipes");
    let out = w
        .kiln_with(&recipes)
        .args(["install", "--json", "-j", "4"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(
        v["outcomes"][0]["note"],
        "the compiler was killed 2 times (most likely by the OOM killer); built with 1 job"
    );
    let log = std::fs::read_to_string(std::path::Path::new(v["logs"].as_str().unwrap()).join("fixture-oom.wheel.log"))
        .unwrap();
    let tries: Vec<&str> = log.lines().filter(|l| l.starts_with("MAX_JOBS=")).collect();
    assert_eq!(tries, ["MAX_JOBS=4", "MAX_JOBS=2", "MAX_JOBS=1"]);
    w.py("import kiln_fixture_oom").unwrap();
}

/// kiln on the two-second fixtures, with its own cache (so no wheel comes from another run).
fn slow_builds(w: &World, python: &std::path::Path, cache: &str, cpus: &str) -> std::process::Output {
    slow_builds_with(w, python, cache, cpus, &[])
}

fn slow_builds_with(
    w: &World,
    python: &std::path::Path,
    cache: &str,
    cpus: &str,
    flags: &[&str],
) -> std::process::Output {
    crate::common::kiln_bare()
        .env("KILN_CPUS", cpus)
        .arg("--recipes")
        .arg(w.dir.path().join("fixtures/parallel-recipes"))
        .arg("--python")
        .arg(python)
        .arg("--cache-dir")
        .arg(w.dir.path().join(cache))
        .args(["--no-progress", "install", "--json", "-j", "1"])
        .args(flags)
        .output()
        .unwrap()
}

/// When a fixture build ran, in nanoseconds since the epoch, from its wheel log.
fn ran(v: &serde_json::Value, name: &str) -> (u128, u128) {
    let log = std::path::Path::new(v["logs"].as_str().unwrap()).join(format!("{name}.wheel.log"));
    let text = std::fs::read_to_string(&log).unwrap();
    let at = |word: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(word))
            .and_then(|n| n.trim().parse::<u128>().ok())
            .unwrap_or_else(|| panic!("no `{word}` in {}", log.display()))
    };
    (at("start "), at("end "))
}

#[test]
fn independent_builds_run_side_by_side_while_cpus_last() {
    let w = World::new();
    // Two CPUs, one job each: both build at once.
    let out = slow_builds(&w, &w.python, "cache-2", "2");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let (a, b) = (ran(&v, "fixture-slow-a"), ran(&v, "fixture-slow-b"));
    assert!(a.0 < b.1 && b.0 < a.1, "no overlap: a {a:?}, b {b:?}");
    // The event log saw both, and the timings report draws a lane for each.
    let events =
        std::fs::read_to_string(std::path::Path::new(v["logs"].as_str().unwrap()).join("events.jsonl")).unwrap();
    for name in ["fixture-slow-a", "fixture-slow-b"] {
        assert!(
            events
                .lines()
                .any(|l| l.contains(&format!("\"step\":\"{name}\"")) && l.contains("\"result\":\"done\"")),
            "{events}"
        );
    }
    let timings = std::fs::read_to_string(v["timings"].as_str().unwrap()).unwrap();
    assert!(timings.contains("kiln install: 2 steps"), "{timings}");
    assert_eq!(timings.matches("class=\"seg wheel\"").count(), 2, "{timings}");
    w.py("import kiln_fixture_slow_a, kiln_fixture_slow_b").unwrap();

    // One CPU: one after the other.
    let single = crate::common::venv(&w.dir.path().join("single"));
    let out = slow_builds(&w, &single, "cache-1", "1");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let (a, b) = (ran(&v, "fixture-slow-a"), ran(&v, "fixture-slow-b"));
    assert!(a.1 <= b.0 || b.1 <= a.0, "overlap on one CPU: a {a:?}, b {b:?}");
    // The CPU the first build gives back goes to the second before the first installs: the
    // second build overlaps the first's install and verification instead of waiting for them.
    let events: Vec<serde_json::Value> =
        std::fs::read_to_string(std::path::Path::new(v["logs"].as_str().unwrap()).join("events.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let (first, second) = match a.0 < b.0 {
        true => ("fixture-slow-a", "fixture-slow-b"),
        false => ("fixture-slow-b", "fixture-slow-a"),
    };
    let at = |step: &str, kind: &str, phase: Option<&str>| {
        events
            .iter()
            .position(|e| e["step"] == step && e["kind"] == kind && phase.is_none_or(|p| e["phase"] == p))
            .unwrap_or_else(|| panic!("no {kind} {phase:?} of {step}: {events:?}"))
    };
    assert!(
        at(second, "started", None) < at(first, "phase", Some("install")),
        "{second} started only after {first} began to install: {events:?}"
    );
}

/// A failed build stops new ones; one under way is not installed (the run is one transaction,
/// F13), unless `--keep-done`, which installs it.
#[test]
fn a_failed_build_stops_new_ones_and_one_under_way_is_installed_only_with_keep_done() {
    let w = World::new();
    w.edit(
        "parallel-recipes/fixture-slow-b.toml",
        "wheel = [\"sh\", \"{src}/build.sh\", \"{python}\", \"{wheel_dir}\", \"{src}\"]",
        "wheel = [\"sh\", \"-c\", \"sleep 1; echo 'error: broken on purpose' >&2; exit 3\"]",
    );
    let out = slow_builds(&w, &w.python, "cache", "2");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["failure"]["name"], "fixture-slow-b", "{v}");
    let results: Vec<(&str, &str)> = v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["name"].as_str().unwrap(), o["result"].as_str().unwrap()))
        .collect();
    assert_eq!(results, [("fixture-slow-b", "failed")]);
    assert!(w.py("import kiln_fixture_slow_a").is_err());
    assert!(w.py("import kiln_fixture_slow_b").is_err());

    let out = slow_builds_with(&w, &w.python, "cache", "2", &["--keep-done"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let results: Vec<(&str, &str)> = v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["name"].as_str().unwrap(), o["result"].as_str().unwrap()))
        .collect();
    assert_eq!(results, [("fixture-slow-a", "done"), ("fixture-slow-b", "failed")]);
    w.py("import kiln_fixture_slow_a").unwrap();
    assert!(w.py("import kiln_fixture_slow_b").is_err());
}

#[test]
fn verify_runs_every_proof_again_for_what_is_installed() {
    let w = World::new();
    let verify = |args: &[&str]| {
        let out = w.kiln().args(["verify", "--json"]).args(args).output().unwrap();
        let v = stdout_json(&out);
        assert_eq!(v["probe_cache"], "refresh", "{v}");
        let seen: Vec<(String, String)> = v["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].as_str().unwrap().into(), c["status"].as_str().unwrap().into()))
            .collect();
        (out.status.code(), seen)
    };
    // Nothing installed: nothing to verify, said as an error.
    let out = w.kiln().arg("verify").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("nothing to verify"), "{}", text(&out.stderr));

    assert!(
        w.kiln()
            .args(["install", "fixture-pure"])
            .output()
            .unwrap()
            .status
            .success()
    );
    assert_eq!(verify(&[]), (Some(0), pairs(&[("fixture-pure", "ok")])));
    // A module deleted since: the proof fails again, whatever the last run saw.
    std::fs::remove_file(w.site_packages().join("kiln_fixture_pure/words.py")).unwrap();
    let (code, seen) = verify(&[]);
    assert_eq!((code, seen), (Some(1), pairs(&[("fixture-pure", "broken")])));
    // Named: it and what it needs, installed or not.
    assert_eq!(
        verify(&["fixture-app"]),
        (
            Some(1),
            pairs(&[
                ("fixture-cext", "missing"),
                ("fixture-pure", "broken"),
                ("fixture-app", "missing")
            ])
        )
    );
}

/// Records the environment, arguments and working directory it ran with into the JSON file
/// named by its first argument, then runs the rest of its arguments (if any) as a command.
const DUMP_ENV: &str = r#"import json, os, sys
with open(sys.argv[1], "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv[1:], "cwd": os.getcwd()}, f)
if len(sys.argv) > 2:
    os.execv(sys.argv[2], sys.argv[2:])
"#;

#[test]
fn the_build_runs_with_the_env_and_commands_kiln_plan_shows() {
    let w = World::new();
    let dumps = w.dir.path().join("dumps");
    std::fs::create_dir_all(&dumps).unwrap();
    w.write("packages/kiln-fixture-pure/dump_env.py", DUMP_ENV);
    let dump = |name: &str| dumps.join(name).display().to_string();
    w.write(
        "recipes/fixture-pure.toml",
        &format!(
            r#"[package]
name = "fixture-pure"
dist = "kiln-fixture-pure"
version = "1.0.0"
summary = "test fixture: pure Python, built by commands that write down how they ran"

[source]
path = "../packages/kiln-fixture-pure"

[build]
env = {{ MAX_JOBS = "{{jobs}}", CC = "gcc", NVCC_APPEND_FLAGS = "-t{{jobs}} --x", KILN_TEST_VERSION = "{{version}}", KILN_TEST_PYTHON = "{{python}}" }}
prepare = [["{{python}}", "{{src}}/dump_env.py", "{prepare}"]]
wheel = ["{{python}}", "{{src}}/dump_env.py", "{wheel}", "{{python}}", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-input", "-w", "{{wheel_dir}}", "{{src}}"]

[verify]
imports = ["kiln_fixture_pure"]
"#,
            prepare = dump("prepare.json"),
            wheel = dump("wheel.json"),
        ),
    );
    // Plan and install are separate runs: both see three CPUs.
    let plan = w
        .kiln()
        .env("KILN_CPUS", "3")
        .args(["plan", "--json", "fixture-pure"])
        .output()
        .unwrap();
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    let plan = stdout_json(&plan);
    let step = crate::common::step(&plan, "fixture-pure");
    assert_eq!(step["jobs"], 3, "{step}");
    let shown = step["env"].as_object().unwrap();
    assert_eq!(shown["MAX_JOBS"], "3");
    assert_eq!(shown["NVCC_APPEND_FLAGS"], "-t3 --x");
    assert_eq!(shown["KILN_TEST_VERSION"], "1.0.0");
    assert_eq!(shown["KILN_TEST_PYTHON"], w.python.display().to_string());

    let out = w
        .kiln()
        .env("KILN_CPUS", "3")
        .args(["install", "--json", "fixture-pure"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    w.py("import kiln_fixture_pure").unwrap();
    for (name, command) in [
        ("prepare.json", &step["prepare"][0]),
        ("wheel.json", &step["wheel_command"]),
    ] {
        let ran: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dumps.join(name)).unwrap()).unwrap();
        // Every variable the plan shows, with the value it shows.
        for (k, v) in shown {
            assert_eq!(&ran["env"][k], v, "{name}: {k}");
        }
        // The arguments the plan shows, with the run's directories in place of its placeholders.
        let src = ran["cwd"].as_str().unwrap();
        let wheel_dir = std::path::Path::new(src)
            .parent()
            .unwrap()
            .join("wheel")
            .display()
            .to_string();
        let argv: Vec<String> = ran["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                a.as_str()
                    .unwrap()
                    .replace(&wheel_dir, "<wheel dir>")
                    .replace(src, "<source dir>")
            })
            .collect();
        let shown_argv: Vec<&str> = command
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(shown_argv[0], w.python.display().to_string(), "{name}");
        assert_eq!(argv, shown_argv[2..], "{name}: {command}");
        assert_eq!(shown_argv[1], "<source dir>/dump_env.py");
    }
}

/// `[install] deps = true`: the built wheel's runtime dependencies (here `six`, from PyPI) are
/// installed with it, while what is already there is not reinstalled: a dependency that is
/// already installed keeps its files (its mtime), and a second install builds nothing.
#[test]
fn runtime_dependencies_are_installed_and_nothing_present_is_reinstalled() {
    let w = World::new();
    w.edit(
        "packages/kiln-fixture-pure/pyproject.toml",
        "description = \"kiln test fixture: a pure Python package\"",
        "description = \"kiln test fixture: a pure Python package\"\ndependencies = [\"six\", \"wheel\"]",
    );
    w.edit(
        "recipes/fixture-pure.toml",
        "[verify]",
        "[install]\ndeps = true\n\n[verify]",
    );
    let wheel_before = w
        .py("import wheel, os; print(os.stat(wheel.__file__).st_mtime_ns)")
        .unwrap();
    assert!(w.py("import six").is_err(), "six is not there before");

    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(w.py("import six, kiln_fixture_pure; print('ok')").unwrap(), "ok");
    let wheel_after = w
        .py("import wheel, os; print(os.stat(wheel.__file__).st_mtime_ns)")
        .unwrap();
    assert_eq!(
        wheel_before, wheel_after,
        "a dependency already installed is left as it was"
    );

    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("built nothing"), "{}", text(&out.stdout));
}

/// The wheel cache's entries (`wheels/<xx>/<key>`).
fn wheel_entries(w: &World) -> Vec<std::path::PathBuf> {
    let shards = std::fs::read_dir(w.cache.join("wheels"))
        .into_iter()
        .flatten()
        .flatten();
    shards
        .flat_map(|s| std::fs::read_dir(s.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .collect()
}

/// Issue 9: a wheel that built but failed verification because something outside it is missing
/// (here a dependency nobody installed) is kept, unverified, and the next run installs it and
/// verifies it again instead of compiling. A wheel that fails in its own files (an extension
/// with an undefined symbol) is not kept.
#[test]
fn a_wheel_that_failed_outside_itself_is_kept_and_the_next_run_does_not_compile_it() {
    let w = World::new();
    w.edit(
        "packages/kiln-fixture-cext/kiln_fixture_cext/__init__.py",
        "VERSION = \"1.0.0\"",
        "import kiln_fixture_dep  # from a distribution kiln does not install\n\nVERSION = \"1.0.0\"",
    );
    let out = w.kiln().args(["install", "--json", "fixture-cext"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let logs = std::path::PathBuf::from(v["logs"].as_str().unwrap());
    assert!(logs.join("fixture-cext.wheel.log").is_file(), "the first run compiles");
    let fate = v["failure"]["wheel"].as_str().unwrap();
    assert!(fate.starts_with("kept, built but unverified, at "), "{fate}");
    assert!(
        fate.contains(
            "No module named 'kiln_fixture_dep', and kiln_fixture_dep is not part of kiln_fixture_cext-1.0.0-"
        ),
        "{fate}"
    );
    let kept = std::path::PathBuf::from(
        fate["kept, built but unverified, at ".len()..]
            .split(": ")
            .next()
            .unwrap(),
    );
    assert!(kept.starts_with(w.cache.join("wheels")) && kept.is_file(), "{fate}");
    assert!(
        w.py("import kiln_fixture_cext").is_err(),
        "the environment was rolled back"
    );
    // The human error says the same.
    let out = w.kiln().args(["install", "fixture-cext"]).output().unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains("import kiln_fixture_cext failed: ModuleNotFoundError: No module named 'kiln_fixture_dep'"),
        "{err}"
    );
    assert!(
        err.contains(&format!("  wheel: kept, built but unverified, at {}", kept.display())),
        "{err}"
    );
    // `kiln cache` lists it as unverified, and nothing calls it ok.
    let cache = stdout_json(&w.kiln().args(["cache", "--json"]).output().unwrap());
    assert_eq!(cache["unverified"][0]["wheel"], kept.display().to_string(), "{cache}");
    assert!(
        cache["unverified"][0]["why"]
            .as_str()
            .unwrap()
            .contains("kiln_fixture_dep")
    );
    let human = text(&w.kiln().arg("cache").output().unwrap().stdout);
    assert!(
        human.contains("built but unverified") && human.contains(&kept.display().to_string()),
        "{human}"
    );
    let doctor = stdout_json(&w.kiln().args(["doctor", "--json", "fixture-cext"]).output().unwrap());
    assert_eq!(crate::common::component(&doctor, "fixture-cext")["status"], "missing");

    // The dependency appears: the kept wheel is installed and verified; nothing is compiled.
    crate::common::stand_in(
        &w.python,
        &w.dir.path().join("dep"),
        "kiln-fixture-dep",
        "1.0",
        "kiln_fixture_dep",
        &[],
    );
    let out = w.kiln().args(["install", "--json", "fixture-cext"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["result"], "ok");
    let o = &v["outcomes"][0];
    assert_eq!(
        (o["name"].as_str(), o["result"].as_str(), o["from_cache"].as_bool()),
        (Some("fixture-cext"), Some("done"), Some(true)),
        "{o}"
    );
    assert!(
        o["note"]
            .as_str()
            .unwrap()
            .contains("verified now; nothing was compiled"),
        "{o}"
    );
    let logs = std::path::PathBuf::from(v["logs"].as_str().unwrap());
    assert!(!logs.join("fixture-cext.wheel.log").exists(), "no build ran");
    assert_eq!(w.py("import kiln_fixture_cext as c; print(c.add(2, 3))").unwrap(), "5");
    let cache = stdout_json(&w.kiln().args(["cache", "--json"]).output().unwrap());
    assert_eq!(cache["unverified"], serde_json::json!([]), "verified now: {cache}");
    assert_eq!(statuses(&w)[0].1, "ok");

    // A new version whose extension does not load (a symbol nothing defines): its own failure.
    w.edit(
        "recipes/fixture-cext.toml",
        "version = \"1.0.0\"",
        "version = \"1.1.0\"",
    );
    w.edit(
        "packages/kiln-fixture-cext/pyproject.toml",
        "version = \"1.0.0\"",
        "version = \"1.1.0\"",
    );
    w.edit(
        "packages/kiln-fixture-cext/kiln_fixture_cext/_speedups.c",
        "static PyObject *add(",
        "long kiln_fixture_no_such_symbol(long);\n\nstatic PyObject *add(",
    );
    w.edit(
        "packages/kiln-fixture-cext/kiln_fixture_cext/_speedups.c",
        "PyLong_FromLong(a + b)",
        "PyLong_FromLong(kiln_fixture_no_such_symbol(a) + b)",
    );
    let out = w.kiln().args(["install", "fixture-cext"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("undefined symbol: kiln_fixture_no_such_symbol"), "{err}");
    assert!(
        err.contains("  wheel: not kept: the failure is the wheel's own ("),
        "{err}"
    );
    assert!(err.contains("is the wheel's own file"), "{err}");
    assert_eq!(wheel_entries(&w).len(), 1, "only the verified 1.0.0 wheel is cached");
    let cache = stdout_json(&w.kiln().args(["cache", "--json"]).output().unwrap());
    assert_eq!(cache["unverified"], serde_json::json!([]));
    assert_eq!(w.py("import kiln_fixture_cext as c; print(c.add(2, 3))").unwrap(), "5");
}

#[test]
fn run_time_defaults_are_installed_rolled_back_and_uninstalled_with_the_component() {
    let w = World::new();
    w.edit(
        "recipes/fixture-cext.toml",
        "[verify]",
        "[runtime]\nenv = { KILN_FIXTURE_BUILT = \"{version}\", KILN_FIXTURE_JOBS = \"{jobs}\" }\n\n[verify]",
    );
    let plan = stdout_json(&w.kiln().args(["plan", "--json", "-j", "3"]).output().unwrap());
    assert_eq!(
        step(&plan, "fixture-cext")["runtime_env"],
        serde_json::json!({"KILN_FIXTURE_BUILT": "1.0.0", "KILN_FIXTURE_JOBS": "3"})
    );
    assert!(w.kiln().args(["install", "-j", "3"]).output().unwrap().status.success());
    let pth = w.site_packages().join("kiln-fixture-cext-env.pth");
    assert!(pth.is_file());
    // Every interpreter of the environment starts with the defaults; the user's value wins.
    let read = "import os; print(os.environ['KILN_FIXTURE_BUILT'], os.environ['KILN_FIXTURE_JOBS'])";
    assert_eq!(w.py(read).unwrap(), "1.0.0 3");
    let mine = StdCommand::new(&w.python)
        .args(["-c", read])
        .env("KILN_FIXTURE_JOBS", "9")
        .output()
        .unwrap();
    assert_eq!(text(&mine.stdout).trim(), "1.0.0 9");
    // doctor reads the file back.
    let doc = stdout_json(&w.kiln().args(["doctor", "--json", "-j", "3"]).output().unwrap());
    let rt = &doc["runtime"][0];
    assert_eq!(rt["component"], "fixture-cext");
    assert_eq!(rt["file"]["present"], true);
    assert_eq!(rt["matches"], true, "{rt}");

    // 1.1.0 installs but does not import: its file is taken out and 1.0.0's put back.
    for (file, from, to) in [
        (
            "recipes/fixture-cext.toml",
            "version = \"1.0.0\"",
            "version = \"1.1.0\"",
        ),
        (
            "packages/kiln-fixture-cext/pyproject.toml",
            "version = \"1.0.0\"",
            "version = \"1.1.0\"",
        ),
        (
            "packages/kiln-fixture-cext/kiln_fixture_cext/__init__.py",
            "VERSION = \"1.0.0\"",
            "VERSION = \"1.1.0\"\nraise ImportError('broken on purpose')",
        ),
    ] {
        w.edit(file, from, to);
    }
    let out = w.kiln().args(["install", "-j", "3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(w.py(read).unwrap(), "1.0.0 3");

    // Uninstalling the distribution removes the file with it (it is in RECORD).
    let out = pip_uninstall(&w.python, "kiln-fixture-cext");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!pth.exists());
    assert!(w.py("import os; print(os.environ.get('KILN_FIXTURE_BUILT'))").unwrap() == "None");
}

fn pip_uninstall(python: &std::path::Path, dist: &str) -> std::process::Output {
    StdCommand::new(python)
        .args(["-m", "pip", "uninstall", "-y", dist])
        .output()
        .unwrap()
}
