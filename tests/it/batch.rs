//! Builds that finish together install together (issue 24, item 4): one installer call, each
//! component's imports proven in an interpreter of its own; a batch that fails goes back to one
//! step at a time, which names the step that failed; a kill in the middle of a batch is rolled
//! back whole by the next command.
//!
//! Three fixture packages, written here: `batch-first` builds at once; `batch-a` and `batch-b`
//! build their wheel, leave a mark, then wait until `batch-first` is installed before they
//! exit. `batch-first`'s module waits on import until both marks are there, then a second more:
//! so both finish while it is verified, and wait for their install together.

use std::path::Path;

use crate::common::{World, stdout_json, text};

const PYPROJECT: &str = r#"[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "kiln-fixture-batch-NAME"
version = "1.0.0"

[tool.setuptools]
packages = ["kiln_fixture_batch_NAME"]
"#;

/// Builds the wheel, then (for a and b) leaves its mark and waits until batch-first's module
/// is in site-packages (b 0.3 s longer).
const BUILD: &str = r#"#!/bin/sh
"$1" -m pip wheel --no-deps --no-build-isolation --no-input -w "$2" "$3" || exit 1
[ "$4" = wait ] || exit 0
touch "MARKS/built-$5"
site=$("$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
i=0
while [ ! -e "$site/kiln_fixture_batch_first" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
# b ends a little after a: the batch is [a, b], and one at a time a goes first.
[ "$5" = b ] && sleep 0.3
exit 0
"#;

/// batch-first's module: waits until a and b are built, then a second more.
const FIRST: &str = r#"import os, time
end = time.time() + 120
while time.time() < end and not all(os.path.exists(os.path.join("MARKS", "built-" + n)) for n in "ab"):
    time.sleep(0.05)
time.sleep(1.0)
"#;

const RECIPE: &str = r#"[package]
name = "fixture-batch-NAME"
dist = "kiln-fixture-batch-NAME"
version = "1.0.0"
summary = "test fixture: builds that finish together"

[source]
path = "../packages/kiln-fixture-batch-NAME"

[build]
wheel = ["sh", "{src}/build.sh", "{python}", "{wheel_dir}", "{src}", "WAIT", "NAME"]

[verify]
imports = IMPORTS
"#;

/// The three fixtures in `w` under `batch-recipes`; `b_imports` is batch-b's `[verify] imports`.
fn batch_world(b_imports: &str) -> World {
    let w = World::new();
    let marks = w.dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let marks = marks.display().to_string();
    let first = FIRST.replace("MARKS", &marks);
    for (name, wait, imports, init) in [
        ("first", "no", r#"["kiln_fixture_batch_first"]"#, first.as_str()),
        ("a", "wait", r#"["kiln_fixture_batch_a"]"#, ""),
        ("b", "wait", b_imports, ""),
    ] {
        let pkg = format!("packages/kiln-fixture-batch-{name}");
        w.write(&format!("{pkg}/pyproject.toml"), &PYPROJECT.replace("NAME", name));
        w.write(&format!("{pkg}/kiln_fixture_batch_{name}/__init__.py"), init);
        w.write(&format!("{pkg}/build.sh"), &BUILD.replace("MARKS", &marks));
        let recipe = RECIPE
            .replace("NAME", name)
            .replace("WAIT", wait)
            .replace("IMPORTS", imports);
        w.write(&format!("batch-recipes/fixture-batch-{name}.toml"), &recipe);
    }
    w
}

fn install(w: &World, env: &[(&str, &str)]) -> std::process::Output {
    let mut c = w.kiln_with(&w.dir.path().join("fixtures/batch-recipes"));
    c.env("KILN_CPUS", "3");
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(["install", "--json", "-j", "1"])
        .args(["fixture-batch-first", "fixture-batch-a", "fixture-batch-b"])
        .output()
        .unwrap()
}

/// The install phases' details from a run's events, by step.
fn install_details(logs: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(logs.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == "phase" && e["phase"] == "install")
        .map(|e| {
            (
                e["step"].as_str().unwrap().to_string(),
                e["detail"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn installed(w: &World) -> String {
    w.py("import importlib.metadata as m\n\
         print(sorted(d.metadata['Name'] for d in m.distributions() if 'batch' in d.metadata['Name']))")
        .unwrap()
}

#[test]
fn builds_that_finish_together_install_in_one_call_and_each_is_proven_on_its_own() {
    let w = batch_world(r#"["kiln_fixture_batch_b"]"#);
    let out = install(&w, &[]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    let logs = Path::new(v["logs"].as_str().unwrap()).to_path_buf();
    let details = install_details(&logs);
    let of = |step: &str| details.iter().find(|(s, _)| s == step).map(|(_, d)| d.clone()).unwrap();
    assert!(!of("fixture-batch-first").contains("one call"), "{details:?}");
    for step in ["fixture-batch-a", "fixture-batch-b"] {
        assert!(of(step).contains("one call with 1 more"), "{details:?}");
    }
    // One installer call: both steps' install logs are its log, naming both wheels.
    let log_a = std::fs::read_to_string(logs.join("fixture-batch-a.install.log")).unwrap();
    let log_b = std::fs::read_to_string(logs.join("fixture-batch-b.install.log")).unwrap();
    assert_eq!(log_a, log_b);
    assert!(
        log_a.contains("kiln_fixture_batch_a-1.0.0") && log_a.contains("kiln_fixture_batch_b-1.0.0"),
        "{log_a}"
    );
    // Each is recorded and verified as a step installed alone would be.
    for r in v["outcomes"].as_array().unwrap() {
        assert_eq!(r["result"], "done", "{v}");
    }
    w.py("import kiln_fixture_batch_a, kiln_fixture_batch_b, kiln_fixture_batch_first")
        .unwrap();
    let doctor = w
        .kiln_with(&w.dir.path().join("fixtures/batch-recipes"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let d = stdout_json(&doctor);
    for c in d["components"].as_array().unwrap() {
        assert_eq!(c["status"], "ok", "{d}");
    }
}

#[test]
fn a_batch_that_fails_goes_back_to_one_step_at_a_time_which_names_the_step() {
    let w = batch_world(r#"["kiln_fixture_batch_b", "kiln_fixture_batch_b.missing"]"#);
    let out = install(&w, &[]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let v = stdout_json(&out);
    let logs = Path::new(v["logs"].as_str().unwrap()).to_path_buf();
    let details = install_details(&logs);
    // The batch was tried, then each step installed on its own.
    let tries = |step: &str| details.iter().filter(|(s, _)| s == step).count();
    assert!(
        details.iter().any(|(_, d)| d.contains("one call with 1 more")),
        "{details:?}"
    );
    assert_eq!(tries("fixture-batch-b"), 2, "{details:?}");
    let log = std::fs::read_to_string(logs.join("fixture-batch-b.install.log")).unwrap();
    assert!(log.contains("which failed: fixture-batch-b: "), "{log}");
    let err = text(&out.stdout);
    assert!(
        err.contains("fixture-batch-b") && err.contains("kiln_fixture_batch_b.missing"),
        "{err}"
    );
    // The step that went on alone says why in its outcome.
    let outcomes = v["outcomes"].as_array().unwrap();
    let a = outcomes.iter().find(|o| o["name"] == "fixture-batch-a").unwrap();
    let note = a["note"].as_str().unwrap_or("");
    assert!(
        note.contains("installed on its own after the batch it was in failed"),
        "{a}"
    );
    // One transaction: what the run installed is gone again.
    assert_eq!(installed(&w), "[]", "{err}");
}

#[test]
fn a_kill_in_the_middle_of_a_batch_is_rolled_back_whole_by_the_next_command() {
    let w = batch_world(r#"["kiln_fixture_batch_b"]"#);
    let out = install(&w, &[("KILN_TEST_KILL_AT", "installed fixture-batch-b#1")]);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9),
        "{}",
        text(&out.stderr)
    );
    assert!(
        installed(&w).contains("kiln-fixture-batch-a"),
        "the kill came after the batch's install"
    );
    let doctor = w
        .kiln_with(&w.dir.path().join("fixtures/batch-recipes"))
        .args(["doctor"])
        .output()
        .unwrap();
    let err = text(&doctor.stderr);
    // In the order the builds finished; the step proven before the batch goes with it.
    let batch = ["fixture-batch-a, fixture-batch-b", "fixture-batch-b, fixture-batch-a"];
    assert!(
        batch
            .iter()
            .any(|b| err.contains(&format!("while installing {b} into")))
            && err.contains("installed together and not yet verified")
            && err.contains("earlier steps (fixture-batch-first) were rolled back too"),
        "{err}"
    );
    assert_eq!(installed(&w), "[]", "{err}");
    assert!(
        !w.cache.join("journal").read_dir().unwrap().any(|e| e.is_ok()),
        "a journal is left"
    );
}

#[test]
fn no_member_of_a_batch_is_proven_by_what_another_member_loaded() {
    let w = batch_world(r#"["kiln_fixture_batch_b"]"#);
    // batch-b imports only where batch-a was imported first in the same interpreter.
    w.write(
        "packages/kiln-fixture-batch-b/kiln_fixture_batch_b/__init__.py",
        "import sys\nassert 'kiln_fixture_batch_a' in sys.modules, 'needs kiln_fixture_batch_a loaded'\n",
    );
    let out = install(&w, &[]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let v = stdout_json(&out);
    let details = install_details(Path::new(v["logs"].as_str().unwrap()));
    assert!(
        details.iter().any(|(_, d)| d.contains("one call with 1 more")),
        "{details:?}"
    );
    let err = text(&out.stdout);
    assert!(err.contains("needs kiln_fixture_batch_a loaded"), "{err}");
    assert_eq!(installed(&w), "[]", "{err}");
}

#[test]
fn members_that_install_their_dependencies_go_in_one_uv_call_within_the_constraints() {
    let w = batch_world(r#"["kiln_fixture_batch_b"]"#);
    w.edit(
        "packages/kiln-fixture-batch-a/pyproject.toml",
        "version = \"1.0.0\"",
        "version = \"1.0.0\"\ndependencies = [\"six\"]",
    );
    for name in ["a", "b"] {
        w.edit(
            &format!("batch-recipes/fixture-batch-{name}.toml"),
            "[verify]",
            "[install]\ndeps = true\n\n[verify]",
        );
    }
    let out = install(&w, &[]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    let logs = Path::new(v["logs"].as_str().unwrap()).to_path_buf();
    let details = install_details(&logs);
    assert!(
        details
            .iter()
            .filter(|(_, d)| d.contains("one call with 1 more"))
            .count()
            == 2,
        "{details:?}"
    );
    let log = std::fs::read_to_string(logs.join("fixture-batch-a.install.log")).unwrap();
    for arg in [
        "--reinstall-package kiln-fixture-batch-a",
        "--reinstall-package kiln-fixture-batch-b",
        "--constraint",
    ] {
        assert!(log.contains(arg), "{arg} not in {log}");
    }
    w.py("import six, kiln_fixture_batch_a, kiln_fixture_batch_b").unwrap();
}
