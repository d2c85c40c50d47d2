//! `kiln bundle --for` (issue 20): a bundle planned on this host for another node's facts, with
//! wheels for that node's tags, installed there with no network; the proven lock is written
//! only there, and a proof that needs a GPU is said not to have run, never to have passed.

use std::path::{Path, PathBuf};

use super::common::*;

/// Jinja2 3.1.6, a real wheel from PyPI (https://pypi.org/project/Jinja2/3.1.6/), offered by
/// a fixture recipe as its prebuilt wheel; it requires MarkupSafe, whose wheels are per Python
/// version (this host's and the node's differ).
const JINJA_URL: &str = "https://files.pythonhosted.org/packages/62/a1/3d680cbfd5f4b8f15abc1d571870c5fc3e594bb582bc3b64ea099db13e56/jinja2-3.1.6-py3-none-any.whl";
const JINJA_SHA: &str = "85ece4451f492d0c13c5dd7c13a64681a86afae63a5f347908daf103ce6d2f67";

/// This host's `python3` minor version (`11` for 3.11).
fn host_minor() -> u32 {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.version_info[1])"])
        .output()
        .unwrap();
    text(&out.stdout).trim().parse().unwrap()
}

/// Another CPython 3 than this host's `python3` (the node's interpreter), and its minor
/// version: pyenv's, else one uv finds on PATH, else one uv brings (`uv python install`).
fn another_python() -> (PathBuf, u32) {
    let host = host_minor();
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    for minor in [12, 13, 11, 10].into_iter().filter(|m| *m != host) {
        let found = pyenv
            .iter()
            .flat_map(|root| std::fs::read_dir(root.join("versions")).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("3.{minor}.")))
            })
            .map(|p| p.join(format!("bin/python3.{minor}")))
            .find(|p| p.is_file());
        if let Some(p) = found {
            return (p, minor);
        }
    }
    let find = |args: &[&str]| {
        let out = std::process::Command::new(uv()).args(args).output().ok()?;
        let path = text(&out.stdout).trim().to_string();
        (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
    };
    for minor in [12, 13, 11, 10].into_iter().filter(|m| *m != host) {
        let v = format!("3.{minor}");
        if let Some(p) = find(&["python", "find", "--no-config", "--system", &v]) {
            return (p, minor);
        }
    }
    let v = if host == 12 { "3.13" } else { "3.12" };
    let brought = std::process::Command::new(uv())
        .args(["python", "install", "--no-config", v])
        .output()
        .unwrap();
    assert!(
        brought.status.success(),
        "this test needs a CPython 3 other than python3 3.{host} (pyenv, PATH, or `uv python install {v}`): {}",
        text(&brought.stderr)
    );
    let p = find(&["python", "find", "--no-config", v]).expect("the Python uv just installed");
    (p, v[2..].parse().unwrap())
}

#[test]
fn a_bundle_planned_for_another_node_installs_there_offline_and_writes_the_proven_lock() {
    let w = World::new();
    w.write(
        "recipes/fixture-jinja.toml",
        &format!(
            "[package]\nname = \"fixture-jinja\"\ndist = \"jinja2\"\n\
             [[versions]]\nversion = \"3.1.6\"\npath = \"../packages/kiln-fixture-pure\"\n\
             wheels = [{{ url = \"{JINJA_URL}\", sha256 = \"{JINJA_SHA}\" }}]\n\
             [install]\ndeps = true\n\
             [verify]\nimports = [\"jinja2\"]\nsmoke = \"smoke/jinja.py\"\n"
        ),
    );
    w.write(
        "recipes/smoke/jinja.py",
        "import jinja2\nprint(jinja2.Template('{{ 6 * 7 }}').render())\n",
    );

    // The node: a venv of another Python than this host's, with a 9.0 GPU and a 580 driver (the overrides stand in for
    // nvidia-smi there); its facts as its `doctor --json` writes them.
    let (python, minor) = another_python();
    let node_py = venv_of(&python, &w.dir.path().join("node"));
    let (node_tag, host_tag) = (format!("-cp3{minor}-"), format!("-cp3{}-", host_minor()));
    let out = w
        .kiln_for(&node_py)
        .env("KILN_GPU_ARCH", "9.0")
        .env("KILN_DRIVER_VERSION", "580.95.05")
        .args(["doctor", "--json", "fixture-jinja"])
        .output()
        .unwrap();
    let doc = stdout_json(&out);
    let version = doc["node"]["python"]["python"]["version"].as_str().unwrap();
    assert!(version.starts_with(&format!("3.{minor}.")), "{version}");
    let facts = w.dir.path().join("node.json");
    std::fs::write(&facts, serde_json::to_vec(&doc).unwrap()).unwrap();

    // Here (Python 3.11, no GPU): the plan for that node, packed.
    let bundle = w.dir.path().join("jinja.tar");
    let out = w
        .kiln()
        .args(["bundle", "--for"])
        .arg(&facts)
        .arg("fixture-jinja")
        .arg("-o")
        .arg(&bundle)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let doc = stdout_json(&out);
    assert!(doc["planned_for"].is_string(), "{doc}");
    // The plan judged the offered wheel after downloading it, and `--json` told that wait as
    // events on stderr: started, bytes so far, finished.
    let events: Vec<serde_json::Value> = text(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["task"] == "download" && e["subject"] == "fixture-jinja")
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"started"), "{}", text(&out.stderr));
    assert_eq!(events[0]["detail"], "jinja2-3.1.6-py3-none-any.whl");
    assert!(kinds.contains(&"progress"), "{kinds:?}");
    assert_eq!(
        (kinds.last(), &events.last().unwrap()["ok"]),
        (Some(&"finished"), &true.into())
    );
    let entries = bundle_entries(&doc);
    assert!(
        entries
            .iter()
            .any(|e| e.starts_with("wheelhouse/markupsafe-") && e.contains(&node_tag)),
        "MarkupSafe for the node's Python ({node_tag}), not this host's: {entries:?}"
    );
    assert!(!entries.iter().any(|e| e.contains(&host_tag)), "{entries:?}");
    assert!(
        entries.contains(&format!("sources/{JINJA_SHA}").as_str()),
        "{entries:?}"
    );

    // There, with every index and proxy closed: installed from the bundle alone, proven, locked.
    let there = tempfile::tempdir().unwrap();
    let mut c = w.kiln_elsewhere(&node_py, &w.dir.path().join("node-cache"));
    for (k, v) in [
        ("PIP_INDEX_URL", "http://127.0.0.1:9/simple"),
        ("UV_INDEX_URL", "http://127.0.0.1:9/simple"),
        ("HTTP_PROXY", "http://127.0.0.1:9"),
        ("HTTPS_PROXY", "http://127.0.0.1:9"),
        ("https_proxy", "http://127.0.0.1:9"),
        ("http_proxy", "http://127.0.0.1:9"),
    ] {
        c.env(k, v);
    }
    let out = c
        .current_dir(there.path())
        .args(["install", "--bundle"])
        .arg(&bundle)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("proven here: wrote kiln.lock"), "{stdout}");
    let lock = std::fs::read_to_string(there.path().join("kiln.lock")).unwrap();
    assert!(!lock.contains("planned_for"), "{lock}");
    assert!(lock.contains(&format!("source = \"wheel:{JINJA_SHA}\"")), "{lock}");
    let ran = std::process::Command::new(&node_py)
        .args([
            "-c",
            "import jinja2, markupsafe; print(jinja2.__version__, markupsafe.__version__)",
        ])
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert!(text(&ran.stdout).starts_with("3.1.6 "), "{}", text(&ran.stdout));

    // The GPU proof did not run there (no GPU of 9.0): said so, and not called a pass.
    let out = w
        .kiln_elsewhere(&node_py, &w.dir.path().join("node-cache"))
        .args(["doctor", "fixture-jinja", "--arch", "9.0", "--json"])
        .output()
        .unwrap();
    let doc = stdout_json(&out);
    let jinja = component(&doc, "fixture-jinja");
    let kinds: Vec<&str> = jinja["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"smoke-not-run"), "{jinja}");
    assert!(!kinds.contains(&"smoke-passed"), "{jinja}");
}
