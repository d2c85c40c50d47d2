//! `install` runs exactly the plan it shows: for every kind of step (build, rebuild, install,
//! reinstall, keep, and a rebuild that replaces another distribution) the action and version `plan --json` says are what `install --json` did and
//! what is installed afterwards, the source included. Ground truth: issue 19, "Plan and install
//! disagree": on a venv with torch 2.7.1+cu126, `plan torch` said "reinstall torch 2.7.1" and
//! `install torch` installed 2.14.1 (`index:torch==2.14.1`): the solver kept the installed
//! version, which no recipe entry has a source for, and the install took the recipe's first.
//! Stand-ins play the installed versions the recipes do not describe; six is a real PyPI wheel.

use std::collections::BTreeMap;

use crate::common::{World, stand_in, stdout_json, text};

/// A recipe installing six's PyPI wheels, as torch's installs torch's: two versions by index
/// requirement (https://pypi.org/project/six/1.17.0/, /1.16.0/), `six.moves` imported.
const SIX: &str = r#"[package]
name = "fixture-six"
dist = "six"
accepts = ">=1.10"
summary = "test fixture: a binary wheel from the index"

[[versions]]
version = "1.17.0"
wheel = "six==1.17.0"

[[versions]]
version = "1.16.0"
wheel = "six==1.16.0"

[verify]
imports = ["six", "six.moves"]
"#;

/// (action, version) of each step of `plan --json` for `targets`.
fn planned(w: &World, targets: &[&str]) -> BTreeMap<String, (String, Option<String>)> {
    let out = w.kiln().args(["plan", "--json"]).args(targets).output().unwrap();
    let v = stdout_json(&out);
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let version = s["version"].as_str().map(str::to_string);
            (
                s["name"].as_str().unwrap().to_string(),
                (s["action"].as_str().unwrap().to_string(), version),
            )
        })
        .collect()
}

/// Installs `targets`; each outcome's action, and the version of every component afterwards.
fn installed(w: &World, targets: &[&str]) -> (serde_json::Value, BTreeMap<String, String>) {
    let out = w.kiln().args(["install", "--json"]).args(targets).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    let doctor = stdout_json(&w.kiln().args(["doctor", "--json"]).args(targets).output().unwrap());
    let versions = doctor["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| Some((c["name"].as_str()?.to_string(), c["version"].as_str()?.to_string())))
        .collect();
    (v, versions)
}

/// Every changing step was carried out as planned, and each planned version is the one there.
fn same(plan: &BTreeMap<String, (String, Option<String>)>, v: &serde_json::Value, versions: &BTreeMap<String, String>) {
    let outcomes = v["outcomes"].as_array().map(Vec::as_slice).unwrap_or_default();
    for (name, (action, version)) in plan {
        let o = outcomes.iter().find(|o| o["name"] == name.as_str());
        if action == "keep" {
            assert!(
                o.is_none_or(|o| o["result"] == "kept"),
                "{name} was planned to be kept: {v}"
            );
            continue;
        }
        let o = o.unwrap_or_else(|| panic!("{name}: planned {action}, not carried out: {v}"));
        assert_eq!(o["action"], action.as_str(), "{name}: {v}");
        assert_eq!(o["result"], "done", "{name}: {v}");
        let want = version.as_deref().unwrap();
        assert_eq!(
            versions.get(name).map(String::as_str),
            Some(want),
            "{name}: planned {want}: {versions:?}"
        );
        if let Some(req) = o["source"].as_str().and_then(|s| s.strip_prefix("index:")) {
            assert!(
                req.ends_with(&format!("=={want}")),
                "{name}: planned {want}, installed {req}"
            );
        }
    }
}

#[test]
fn install_carries_out_the_plan_it_shows_for_every_kind_of_step() {
    let w = World::new();
    w.write("recipes/fixture-six.toml", SIX);
    w.edit(
        "recipes/fixture-pure.toml",
        "version = \"1.0.0\"",
        "version = \"1.0.0\"\naccepts = \">=0.9\"",
    );
    // Installed at versions no recipe entry describes, and broken (their imports lack a module).
    stand_in(
        &w.python,
        w.dir.path(),
        "kiln-fixture-pure",
        "0.9.0",
        "kiln_fixture_pure",
        &[],
    );
    stand_in(&w.python, w.dir.path(), "six", "1.15.0", "six", &[]);

    // rebuild, build, reinstall.
    let targets = ["fixture-pure", "fixture-cext", "fixture-six"];
    let plan = planned(&w, &targets);
    let action = |n: &str| plan[n].0.as_str();
    assert_eq!(
        (action("fixture-pure"), action("fixture-cext"), action("fixture-six")),
        ("rebuild", "build", "reinstall"),
        "{plan:?}"
    );
    assert_eq!(
        plan["fixture-pure"].1.as_deref(),
        Some("1.0.0"),
        "the version its source builds: {plan:?}"
    );
    assert_eq!(plan["fixture-six"].1.as_deref(), Some("1.17.0"), "{plan:?}");
    let (v, versions) = installed(&w, &targets);
    same(&plan, &v, &versions);

    // keep, build, install.
    let status = std::process::Command::new(&w.python)
        .args(["-m", "pip", "uninstall", "-y", "-q", "six"])
        .status()
        .unwrap();
    assert!(status.success());
    let targets = ["fixture-app", "fixture-six"];
    let plan = planned(&w, &targets);
    let action = |n: &str| plan[n].0.as_str();
    assert_eq!(
        (action("fixture-pure"), action("fixture-app"), action("fixture-six")),
        ("keep", "build", "install"),
        "{plan:?}"
    );
    let (v, versions) = installed(&w, &targets);
    same(&plan, &v, &versions);
}

/// An installed version no recipe entry describes, adopted (not named, not `--allow-replace`):
/// it cannot be replaced and cannot be installed again, so the step is blocked, naming the
/// versions the recipe has, and nothing is installed.
#[test]
fn a_step_that_would_install_another_version_than_it_shows_is_blocked() {
    let w = World::new();
    w.write("recipes/fixture-six.toml", SIX);
    w.write(
        "recipes/fixture-needs-six.toml",
        "[package]\nname = \"fixture-needs-six\"\ndist = \"kiln-fixture-pure\"\nversion = \"1.0.0\"\n\
         summary = \"test fixture\"\n\n[source]\npath = \"../packages/kiln-fixture-pure\"\n\n\
         [depends]\nfixture-six = \">=1.10\"\n\n[verify]\nimports = [\"kiln_fixture_pure\"]\n",
    );
    stand_in(&w.python, w.dir.path(), "six", "1.15.0", "six", &[]);
    let out = w
        .kiln()
        .args(["plan", "--json", "fixture-needs-six==1.0.0", "fixture-six==1.15.0"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let s = crate::common::step(&v, "fixture-six");
    assert_eq!(s["action"], "blocked", "{s}");
    assert_eq!(s["version"], "1.15.0", "{s}");
    let reason = s["reason"].as_str().unwrap();
    assert!(
        reason.contains("cannot install fixture-six 1.15.0 again: its recipe has no source for that version (it installs 1.17.0, 1.16.0)"),
        "{reason}"
    );
}

/// A replacement: the component installed under its former distribution name (sgl-kernel for
/// sglang-kernel, the rename upstream made: recipes/sglang-kernel.toml `former`) is planned as a
/// rebuild replacing the other distribution, and the install does exactly that: the version the
/// plan shows, from the source it shows, and the former distribution gone.
#[test]
fn install_carries_out_a_replacement_of_another_distribution_as_planned() {
    let w = World::new();
    let former = w.dir.path().join("fixtures/former-recipes/sglang-kernel.toml");
    std::fs::copy(&former, w.recipes.join("sglang-kernel.toml")).unwrap();
    let out = crate::common::pip_install(&w.python)
        .arg("--no-build-isolation")
        .arg(w.packages.join("sgl-kernel"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let targets = ["sglang-kernel"];
    let plan = planned(&w, &targets);
    assert_eq!(
        plan["sglang-kernel"],
        ("rebuild".to_string(), Some("0.4.10".to_string())),
        "{plan:?}"
    );
    let v = stdout_json(&w.kiln().args(["plan", "--json"]).args(targets).output().unwrap());
    assert_eq!(
        crate::common::step(&v, "sglang-kernel")["reasons"][0]["kind"],
        "replace-other"
    );
    let (v, versions) = installed(&w, &targets);
    same(&plan, &v, &versions);
    let left = w.py("import importlib.metadata as m; print(sorted(d.metadata['Name'] for d in m.distributions()))");
    assert!(
        !left.unwrap().contains("'sgl-kernel'"),
        "the former distribution is replaced"
    );
}

/// A later step's dependencies never replace what an earlier step of the same run installed.
/// Ground truth: vLLM 0.26.0 from source through kiln (docs/gpu-proof.md §17): the plan
/// installed nvidia-cutlass-dsl 4.6.0 (vllm 0.26.0 pins it), and the next step, flashinfer
/// 0.6.14 with its dependencies, replaced it by 4.8.1, because the constraints of each step
/// pinned the versions installed before the run. Here six 1.17.0 is installed; an app whose
/// recipe pins fixture-six ==1.16.0 and whose wheel requires `six` is installed with its
/// dependencies after the plan's reinstall of six 1.16.0, and six stays at 1.16.0.
#[test]
fn a_later_steps_dependencies_keep_what_an_earlier_step_installed() {
    let w = World::new();
    w.write("recipes/fixture-six.toml", SIX);
    let app = w.dir.path().join("needs-six");
    std::fs::create_dir_all(app.join("kiln_needs_six")).unwrap();
    std::fs::write(
        app.join("pyproject.toml"),
        "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
         [project]\nname = \"kiln-needs-six\"\nversion = \"1.0.0\"\ndependencies = [\"six\"]\n\
         [tool.setuptools]\npackages = [\"kiln_needs_six\"]\n",
    )
    .unwrap();
    std::fs::write(app.join("kiln_needs_six/__init__.py"), "import six\n").unwrap();
    w.write(
        "recipes/fixture-needs-six.toml",
        &format!(
            "[package]\nname = \"fixture-needs-six\"\ndist = \"kiln-needs-six\"\nversion = \"1.0.0\"\n\
             summary = \"test fixture\"\n\n[source]\npath = \"{}\"\n\n[depends]\nfixture-six = \"==1.16.0\"\n\n\
             [install]\ndeps = true\n\n[verify]\nimports = [\"kiln_needs_six\"]\n",
            app.display()
        ),
    );
    let (_, versions) = installed(&w, &["fixture-six"]);
    assert_eq!(versions["fixture-six"], "1.17.0");
    // kiln keeps an installed component unless allowed to replace it.
    let targets = ["--allow-replace", "fixture-six", "fixture-needs-six"];
    let plan = planned(&w, &targets);
    assert_eq!(
        plan["fixture-six"],
        ("reinstall".to_string(), Some("1.16.0".to_string())),
        "{plan:?}"
    );
    let (v, versions) = installed(&w, &targets);
    same(&plan, &v, &versions);
    assert_eq!(w.py("import six; print(six.__version__)").unwrap().trim(), "1.16.0");
}
