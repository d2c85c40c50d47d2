//! Bundles for air-gapped nodes: `kiln bundle` carries the build requirements and runtime
//! dependencies (real wheels from PyPI) beside the sources, can split itself into parts, and
//! `kiln install --bundle` completes on a node whose every index and proxy is unreachable,
//! building from the bundled sdist with the bundled build requirements when it has to.

use std::path::{Path, PathBuf};

use crate::common::{World, sh, stdout_json, text, venv};

/// A recipe for the fixture with PyPI dependencies, built from its sdist.
fn deps_recipe(w: &World) -> PathBuf {
    let (tarball, sha) = w.sdist("kiln-fixture-deps");
    w.write(
        "recipes/fixture-deps.toml",
        &format!(
            r#"[package]
name = "fixture-deps"
dist = "kiln-fixture-deps"
version = "1.0.0"
summary = "test fixture: runtime dependencies from PyPI"

[source]
sdist = "{}"
sha256 = "{sha}"

[build]
requires = ["setuptools>=68"]

[install]
deps = true

[verify]
imports = ["kiln_fixture_deps"]
"#,
            tarball.display()
        ),
    );
    tarball
}

/// kiln as a node with no network would run it: every index and proxy points at a closed port.
fn offline_node(w: &World, python: &Path, cache: &Path) -> assert_cmd::Command {
    let mut c = w.kiln_elsewhere(python, cache);
    for (k, v) in [
        ("PIP_INDEX_URL", "http://127.0.0.1:9/simple"),
        ("UV_INDEX_URL", "http://127.0.0.1:9/simple"),
        ("HTTP_PROXY", "http://127.0.0.1:9"),
        ("HTTPS_PROXY", "http://127.0.0.1:9"),
        ("http_proxy", "http://127.0.0.1:9"),
        ("https_proxy", "http://127.0.0.1:9"),
        ("PIP_RETRIES", "0"),
        ("PIP_TIMEOUT", "2"),
        ("KILN_NO_UV", "1"),
    ] {
        c.env(k, v);
    }
    c
}

fn months(python: &Path) -> Result<String, String> {
    let out = std::process::Command::new(python)
        .args(["-c", "import kiln_fixture_deps as d; print(d.months(3))"])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(text(&out.stdout).trim().to_string())
    } else {
        Err(text(&out.stderr))
    }
}

/// The `--json` events of `task` a command wrote on stderr.
fn events(out: &std::process::Output, task: &str) -> Vec<serde_json::Value> {
    text(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["task"] == task)
        .collect()
}

#[test]
fn a_split_bundle_installs_with_its_dependencies_and_builds_offline() {
    let w = World::new();
    let tarball = deps_recipe(&w);
    let out = w.kiln().args(["install", "fixture-deps"]).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(months(&w.python).unwrap(), "relativedelta(months=+3)");
    let lockfile = w.lock("fixture-deps");

    let bundle = w.dir.path().join("stack.tar");
    let out = w
        .kiln()
        .args(["bundle", "--json", "--split", "150KiB", "--lock"])
        .arg(&lockfile)
        .arg("-o")
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let entries = crate::common::bundle_entries(&v);
    // The runtime dependencies (dateutil and, through it, six) pinned to what is installed here,
    // and the build requirement with what it needs: real wheels from PyPI.
    for wheel in ["python_dateutil-2.9.0.post0-", "six-", "setuptools-"] {
        assert!(
            entries
                .iter()
                .any(|e| e.starts_with(&format!("wheelhouse/{wheel}")) && e.ends_with(".whl")),
            "{wheel} in {v}"
        );
    }
    // Packing is watched in bytes (issue 24, item 3): it ends with every byte of the entries.
    let pack = events(&out, "pack");
    assert_eq!(pack.first().map(|e| &e["event"]), Some(&"started".into()), "{pack:?}");
    let last = pack.iter().rev().find(|e| e["event"] == "progress").unwrap();
    assert!(
        last["done"].as_u64().unwrap() > 0 && last["done"] == last["total"],
        "{pack:?}"
    );
    assert_eq!(pack.last().unwrap()["ok"], true, "{pack:?}");
    let pinned = v["wheelhouse"]["pinned"].as_array().unwrap();
    assert!(pinned.contains(&"six==1.17.0".into()), "{v}");
    let parts: Vec<PathBuf> = v["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    assert!(parts.len() > 2, "{v}");
    assert!(!bundle.exists());
    for p in &parts {
        assert!(std::fs::metadata(p).unwrap().len() <= 150 * 1024, "{}", p.display());
    }

    // The sdist is gone; the nodes reach no index.
    std::fs::remove_file(&tarball).unwrap();

    // Node A: from the parts, its wheel as built here, its dependencies from the wheelhouse.
    let node = venv(&w.dir.path().join("node-a"));
    assert!(months(&node).is_err());
    let out = offline_node(&w, &node, &w.dir.path().join("cache-a"))
        .args(["install", "--json", "--bundle"])
        .arg(&parts[1])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    assert_eq!(months(&node).unwrap(), "relativedelta(months=+3)");
    let unpack = events(&out, "unpack");
    assert_eq!(
        unpack.iter().map(|e| e["event"].as_str().unwrap()).collect::<Vec<_>>(),
        ["started", "finished"],
        "{unpack:?}"
    );

    // Node B: the bundle without kiln's wheel (the parts joined by `cat`, rewritten without
    // `wheels/` by Python's tarfile), so the node builds from the sdist, with setuptools from the
    // wheelhouse.
    let whole = w.dir.path().join("joined.tar");
    let names: Vec<String> = parts.iter().map(|p| p.display().to_string()).collect();
    let cat = std::process::Command::new("cat").args(&names).output().unwrap();
    std::fs::write(&whole, cat.stdout).unwrap();
    let without = w.dir.path().join("without-wheels.tar");
    crate::common::without_built_wheels(w.dir.path(), &whole, &without);
    let listed = sh(w.dir.path(), &["tar", "-tf", without.to_str().unwrap()]);
    assert!(
        !listed.contains("wheels/") && listed.contains("wheelhouse/"),
        "{listed}"
    );
    let node = venv(&w.dir.path().join("node-b"));
    let out = offline_node(&w, &node, &w.dir.path().join("cache-b"))
        .args(["install", "--json", "--bundle"])
        .arg(&without)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    let outcomes = v["outcomes"].as_array().unwrap();
    assert!(
        outcomes
            .iter()
            .any(|o| o["name"] == "fixture-deps" && o["action"] == "build" && o["result"] == "done"),
        "{v}"
    );
    // The build requirement came from the wheelhouse: nothing else could serve it offline.
    let logs = sh(
        w.dir.path(),
        &[
            "grep",
            "-rh",
            "--include=*.log",
            "setuptools-",
            v["logs"].as_str().unwrap(),
        ],
    );
    assert!(logs.contains("wheelhouse/setuptools-"), "{logs}");
    assert_eq!(months(&node).unwrap(), "relativedelta(months=+3)");

    // A missing part is named, and nothing is installed.
    std::fs::remove_file(&parts[1]).unwrap();
    let node = venv(&w.dir.path().join("node-c"));
    let out = offline_node(&w, &node, &w.dir.path().join("cache-c"))
        .args(["install", "--bundle"])
        .arg(&parts[0])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&format!("{} is missing", parts[1].display())), "{err}");
    assert!(months(&node).is_err());
}
