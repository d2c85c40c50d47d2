//! The probe cache per component, on real venvs and real interpreters: a new target set probes
//! only the components never probed, a changed file re-probes only the components whose imports
//! loaded it, a new version of a required distribution only its dependents, and a cold probe runs each component's imports in an interpreter of its own,
//! side by side, still pinning an import that crashes or hangs on its module.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use serde_json::{Value, json};

use crate::common::{World, component, stand_in, stdout_json};

/// A python that logs every start to `log`, so a test sees how many interpreters kiln ran.
fn logged_python(w: &World) -> (PathBuf, PathBuf) {
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
    (wrapper, log)
}

fn starts(log: &Path) -> usize {
    std::fs::read_to_string(log).map(|s| s.lines().count()).unwrap_or(0)
}

/// A recipe `name` proven by importing `module` of distribution `dist`.
fn recipe(dir: &Path, name: &str, dist: &str, module: &str, depends: &[&str]) {
    let deps: String = depends.iter().map(|d| format!("{d} = \"*\"\n")).collect();
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!(
            "[package]\nname = \"{name}\"\ndist = \"{dist}\"\nversion = \"1\"\naccepts = \"*\"\n\
             [source]\npath = \".\"\n[depends]\n{deps}[verify]\nimports = [\"{module}\"]\n"
        ),
    )
    .unwrap();
}

#[test]
fn a_new_target_set_probes_only_what_was_never_probed_and_a_change_only_its_component() {
    let w = World::new();
    let py = &w.python;
    let scratch = w.dir.path();
    // alpha; beta depends on alpha (recipe and Requires-Dist); gamma requires kiln-helper, a
    // distribution no recipe names.
    stand_in(py, scratch, "kiln-helper", "1.0", "kiln_helper", &[]);
    stand_in(py, scratch, "kiln-alpha", "1.0", "kiln_alpha", &[]);
    stand_in(py, scratch, "kiln-beta", "1.0", "kiln_beta", &["kiln-alpha"]);
    stand_in(py, scratch, "kiln-gamma", "1.0", "kiln_gamma", &["kiln-helper"]);
    // beta's module imports alpha's, as a real dependent does.
    let site = w.site_packages();
    let beta = site.join("kiln_beta/__init__.py");
    let text = std::fs::read_to_string(&beta).unwrap();
    std::fs::write(&beta, format!("import kiln_alpha\n{text}")).unwrap();
    let recipes = scratch.join("units");
    std::fs::create_dir(&recipes).unwrap();
    recipe(&recipes, "alpha", "kiln-alpha", "kiln_alpha", &[]);
    recipe(&recipes, "beta", "kiln-beta", "kiln_beta", &["alpha"]);
    recipe(&recipes, "gamma", "kiln-gamma", "kiln_gamma", &[]);
    let (wrapper, log) = logged_python(&w);
    let doctor = |targets: &[&str]| -> Value {
        let out = crate::common::kiln_bare()
            // CPUs enough for an interpreter per component, whatever this machine has.
            .env("KILN_CPUS", "8")
            .arg("--recipes")
            .arg(&recipes)
            .arg("--python")
            .arg(&wrapper)
            .arg("--cache-dir")
            .arg(&w.cache)
            .args(["doctor", "--json"])
            .args(targets)
            .output()
            .unwrap();
        stdout_json(&out)
    };
    let sources = |v: &Value| {
        (
            v["machine"]["probe_sources"]["distributions"].clone(),
            v["machine"]["probe_sources"]["imports"].clone(),
        )
    };

    let v = doctor(&["alpha"]);
    assert_eq!(sources(&v), (json!("miss"), json!({"alpha": "miss"})));
    assert_eq!(starts(&log), 2, "the listing and alpha's imports");
    // beta needs alpha, probed already: only beta's imports run.
    let v = doctor(&["beta"]);
    assert_eq!(sources(&v), (json!("hit"), json!({"alpha": "hit", "beta": "miss"})));
    assert_eq!(starts(&log), 3);
    assert_eq!(component(&v, "beta")["status"], "ok");
    let all = doctor(&[]);
    assert_eq!(
        sources(&all),
        (json!("hit"), json!({"alpha": "hit", "beta": "hit", "gamma": "miss"}))
    );
    assert_eq!(starts(&log), 4);
    let again = doctor(&[]);
    assert_eq!(again["machine"]["probe_cache"], "hit");
    assert_eq!(again["machine"]["probe_sources"]["interpreters"], 0);
    assert_eq!(again["components"], all["components"]);
    assert_eq!(starts(&log), 4);

    // An edited file of gamma: gamma alone.
    let gamma = site.join("kiln_gamma/__init__.py");
    let text = std::fs::read_to_string(&gamma).unwrap();
    std::fs::write(&gamma, format!("{text}raise ImportError('edited')\n")).unwrap();
    let v = doctor(&[]);
    assert_eq!(
        sources(&v),
        (json!("hit"), json!({"alpha": "hit", "beta": "hit", "gamma": "miss"}))
    );
    assert_eq!(component(&v, "gamma")["status"], "broken");
    assert_eq!(starts(&log), 5);
    std::fs::write(&gamma, &text).unwrap();
    // An edited file of alpha: alpha and beta, whose import loads it; not gamma.
    let alpha = site.join("kiln_alpha/__init__.py");
    std::fs::write(&alpha, "__version__ = \"1.0\"\nEDITED = True\n").unwrap();
    let v = doctor(&["alpha", "gamma"]);
    assert_eq!(
        sources(&v),
        (json!("hit"), json!({"alpha": "miss", "gamma": "miss"})),
        "gamma was restored, so changed too"
    );
    let v = doctor(&[]);
    assert_eq!(
        sources(&v),
        (json!("hit"), json!({"alpha": "hit", "beta": "miss", "gamma": "hit"}))
    );
    assert_eq!(starts(&log), 8);

    // A new version of what gamma requires (no recipe names it): the listing and gamma only.
    stand_in(py, scratch, "kiln-helper", "2.0", "kiln_helper", &[]);
    let v = doctor(&[]);
    assert_eq!(
        sources(&v),
        (json!("miss"), json!({"alpha": "hit", "beta": "hit", "gamma": "miss"}))
    );
    assert_eq!(starts(&log), 10);
    // A distribution nobody requires: the listing only.
    stand_in(py, scratch, "kiln-unrelated", "1.0", "kiln_unrelated", &[]);
    let v = doctor(&[]);
    assert_eq!(
        sources(&v),
        (json!("miss"), json!({"alpha": "hit", "beta": "hit", "gamma": "hit"}))
    );
    for c in ["alpha", "beta", "gamma"] {
        assert_eq!(component(&v, c)["status"], "ok");
    }
    assert_eq!(starts(&log), 11);
}

/// A module that notes when its import started and ended, sleeping `secs` in between.
fn timed_module(site: &Path, module: &str, notes: &Path, secs: f64) {
    std::fs::write(
        site.join(format!("{module}.py")),
        format!(
            "import time\nstart = time.time()\ntime.sleep({secs})\n\
             with open('{}', 'a') as f:\n    f.write('{module} %f %f\\n' % (start, time.time()))\n",
            notes.display()
        ),
    )
    .unwrap();
}

/// (start, end) of each module's import, from the notes.
fn intervals(notes: &Path) -> std::collections::BTreeMap<String, (f64, f64)> {
    std::fs::read_to_string(notes)
        .unwrap()
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            (p[0].to_string(), (p[1].parse().unwrap(), p[2].parse().unwrap()))
        })
        .collect()
}

#[test]
fn a_cold_probe_imports_components_side_by_side_and_still_pins_a_crash_or_hang() {
    let w = World::new();
    let site = w.site_packages();
    let notes = w.dir.path().join("notes.txt");
    std::fs::write(site.join("kiln_crash.py"), "import ctypes\nctypes.string_at(0)\n").unwrap();
    std::fs::write(site.join("kiln_hang.py"), "import time\ntime.sleep(600)\n").unwrap();
    timed_module(&site, "kiln_slow_c", &notes, 2.0);
    timed_module(&site, "kiln_slow_d", &notes, 2.0);
    let dir = w.dir.path().join("side");
    std::fs::create_dir(&dir).unwrap();
    // Four components on a distribution every venv has (pip), each proving itself by one import.
    for (name, module) in [
        ("a-crash", "kiln_crash"),
        ("b-hang", "kiln_hang"),
        ("c-slow", "kiln_slow_c"),
        ("d-slow", "kiln_slow_d"),
    ] {
        recipe(&dir, name, "pip", module, &[]);
    }
    let doctor = |cpus: &str| {
        let started = std::time::Instant::now();
        let out = w
            .kiln_with(&dir)
            .env("KILN_CPUS", cpus)
            .args(["doctor", "--json", "--refresh", "--import-timeout", "4"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        (stdout_json(&out), started.elapsed())
    };
    let check = |v: &Value, interpreters: u64| {
        let crash = component(v, "a-crash");
        assert_eq!(crash["status"], "broken");
        let evidence = crash["evidence"].as_str().unwrap();
        assert!(
            evidence.starts_with("import kiln_crash failed: crashed the interpreter (killed by signal 11 (SIGSEGV))"),
            "{crash}"
        );
        assert_eq!(
            component(v, "b-hang")["evidence"],
            "import kiln_hang failed: timed out: the import did not finish within 4 s"
        );
        assert_eq!(component(v, "c-slow")["status"], "ok");
        assert_eq!(component(v, "d-slow")["status"], "ok");
        assert_eq!(v["machine"]["probe_sources"]["interpreters"], interpreters);
    };

    // Four CPUs: the two slow imports overlap, and the whole probe waits about as long as the
    // hang's time limit, not the sum of everything.
    let (v, took) = doctor("4");
    check(&v, 5); // the listing and one per component
    assert_eq!(v["machine"]["probe_sources"]["side_by_side"], 4);
    let t = intervals(&notes);
    let (c, d) = (t["kiln_slow_c"], t["kiln_slow_d"]);
    assert!(c.0 < d.1 && d.0 < c.1, "side by side: {t:?}");
    assert!(took.as_secs_f64() < 4.0 + 2.0 + 2.0, "took {took:?}");

    // One CPU: the listing, then one interpreter for every import, resumed after the crash and
    // the hang (they are pinned all the same).
    std::fs::remove_file(&notes).unwrap();
    let (v, _) = doctor("1");
    check(&v, 2);
    let t = intervals(&notes);
    let (c, d) = (t["kiln_slow_c"], t["kiln_slow_d"]);
    assert!(c.1 <= d.0 || d.1 <= c.0, "one at a time: {t:?}");
}

#[test]
fn a_module_added_where_a_failed_import_looked_is_seen_without_refresh() {
    let w = World::new();
    let pkg = w.site_packages().join("kiln_pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(pkg.join("__init__.py"), "").unwrap();
    let dir = w.dir.path().join("sub");
    std::fs::create_dir(&dir).unwrap();
    recipe(&dir, "pkg-sub", "pip", "kiln_pkg.sub", &[]);
    let doctor = || stdout_json(&w.kiln_with(&dir).args(["doctor", "--json"]).output().unwrap());
    let v = doctor();
    assert_eq!(component(&v, "pkg-sub")["status"], "broken");
    assert_eq!(doctor()["machine"]["probe_cache"], "hit");
    // The missing module appears in the package's directory (not in site-packages itself).
    std::fs::write(pkg.join("sub.py"), "VALUE = 1\n").unwrap();
    let v = doctor();
    assert_eq!(v["machine"]["probe_sources"]["imports"], json!({"pkg-sub": "miss"}));
    assert_eq!(component(&v, "pkg-sub")["status"], "ok");
}

/// A pure package whose import writes its name to `$KILN_TEST_IMPORTS`, so a test counts how
/// often kiln imported it; its recipe `fixture-NAME`, depending on `depends` when given.
fn counted(w: &World, name: &str, depends: Option<&str>) {
    let dist = format!("kiln-fixture-{name}");
    let module = format!("kiln_fixture_{name}");
    let pkg = w.packages.join(&dist);
    std::fs::create_dir_all(pkg.join(&module)).unwrap();
    std::fs::write(
        pkg.join("pyproject.toml"),
        format!(
            "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
             [project]\nname = \"{dist}\"\nversion = \"1.0.0\"\n[tool.setuptools]\npackages = [\"{module}\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(
        pkg.join(&module).join("__init__.py"),
        format!(
            "import os\nif os.environ.get('KILN_TEST_IMPORTS'):\n    \
             open(os.environ['KILN_TEST_IMPORTS'], 'a').write('{name}\\n')\n"
        ),
    )
    .unwrap();
    let depends = depends
        .map(|d| format!("[depends]\nfixture-{d} = \">=1.0\"\n"))
        .unwrap_or_default();
    w.write(
        &format!("recipes/fixture-{name}.toml"),
        &format!(
            "[package]\nname = \"fixture-{name}\"\ndist = \"{dist}\"\nversion = \"1.0.0\"\n\
             [source]\npath = \"../packages/{dist}\"\n{depends}[verify]\nimports = [\"{module}\"]\n"
        ),
    );
}

/// The verdict an install ends with (doctor's, on the environment as it was left) takes the
/// imports its last verification had just tried, while nothing changed since, instead of trying
/// them again: the largest part of what an install of a ready wheel cost over uv
/// (BENCHMARKS.md, "install of a cached wheel against uv"). A component verified before a later
/// step changed the environment is imported again.
#[test]
fn an_install_verdict_takes_the_imports_its_last_verification_just_tried() {
    let w = World::new();
    counted(&w, "first", None);
    counted(&w, "second", Some("first"));
    let log = w.dir.path().join("imports.log");
    let imports = |name: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == name)
            .count()
    };
    let kiln = |args: &[&str]| {
        let out = w.kiln().env("KILN_TEST_IMPORTS", &log).args(args).output().unwrap();
        assert!(out.status.success(), "{}", crate::common::text(&out.stderr));
        stdout_json(&out)
    };

    // `second` installs after `first`. Its verification was the last: the verdict takes its
    // import from it. `first`'s was followed by `second`'s install, so `first` is imported again.
    let doc = kiln(&["install", "--json", "fixture-second"]);
    assert_eq!(doc["result"], "ok", "{doc}");
    assert_eq!(component(&doc, "fixture-second")["status"], "ok", "{doc}");
    assert_eq!(
        imports("second"),
        1,
        "verified once, not imported again for the verdict"
    );
    assert_eq!(
        imports("first"),
        2,
        "verified, then imported again after `second` changed the environment"
    );

    // The verdict's answers went into the probe cache: doctor imports nothing; --refresh does.
    let doc = kiln(&["doctor", "--json", "fixture-second"]);
    assert_eq!(component(&doc, "fixture-second")["status"], "ok", "{doc}");
    assert_eq!(doc["machine"]["probe_cache"], "hit", "{}", doc["machine"]);
    assert_eq!((imports("first"), imports("second")), (2, 1));
    kiln(&["doctor", "--json", "--refresh", "fixture-second"]);
    assert_eq!((imports("first"), imports("second")), (3, 2));
}
