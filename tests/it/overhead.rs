//! kiln's own work around a build: the backend runs once (kiln's PEP 517 front end), build
//! requirements and installs go through uv (kiln's own copy, brought from PyPI), offline too, a
//! real ninja build's `[n/N]` lines drive progress events, and the peak memory a build took
//! becomes the next plan's `memory_per_job` on this machine.

use std::path::Path;

use crate::common::{World, sh, stdout_json, text, venv};

/// An in-tree PEP 517 backend that writes down each hook called, holds `BALLAST_MIB` of memory
/// while real ninja (from PyPI, a build requirement) compiles six C files one at a time, each
/// followed by a short sleep so that a person (and the test) can watch `[n/N]` move.
const BACKEND: &str = r#"
import base64, hashlib, os, subprocess, zipfile

NAME, VERSION = "kiln_fixture_ninja", os.environ["KILN_TEST_VERSION"]
TAG = "py3-none-any"


def _hook(name):
    with open(os.environ["KILN_TEST_HOOKS"], "a") as f:
        f.write(name + "\n")


def _metadata():
    return "Metadata-Version: 2.1\nName: kiln-fixture-ninja\nVersion: %s\n" % VERSION


def get_requires_for_build_wheel(config_settings=None):
    _hook("get_requires_for_build_wheel")
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _hook("prepare_metadata_for_build_wheel")
    info = os.path.join(metadata_directory, "%s-%s.dist-info" % (NAME, VERSION))
    os.makedirs(info)
    open(os.path.join(info, "METADATA"), "w").write(_metadata())
    return os.path.basename(info)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _hook("build_wheel")
    ballast = b"\x01" * (int(os.environ["BALLAST_MIB"]) << 20)
    os.makedirs("obj", exist_ok=True)
    rules = ["rule cc", "  command = cc -c $in -o $out && sleep 0.4", "  description = CC $out"]
    for i in range(6):
        open("obj/u%d.c" % i, "w").write("int u%d(int x) { return x * %d; }\n" % (i, i + 2))
        rules.append("build obj/u%d.o: cc obj/u%d.c" % (i, i))
    open("build.ninja", "w").write("\n".join(rules) + "\n")
    subprocess.run(["ninja", "-j1"], check=True)
    files = {
        NAME + "/__init__.py": b"VALUE = %d\n" % len(ballast),
        "%s-%s.dist-info/METADATA" % (NAME, VERSION): _metadata().encode(),
        "%s-%s.dist-info/WHEEL" % (NAME, VERSION): (
            "Wheel-Version: 1.0\nGenerator: kiln-test\nRoot-Is-Purelib: true\nTag: %s\n" % TAG
        ).encode(),
    }
    record = "%s-%s.dist-info/RECORD" % (NAME, VERSION)
    lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    files[record] = ("\n".join(lines + [record + ",,"]) + "\n").encode()
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return name
"#;

const BALLAST_MIB: u64 = 300;

/// The ninja fixture (package and recipe) at `version`; the hooks the backend runs are written
/// to `hooks`.
fn ninja_fixture(w: &World, version: &str, hooks: &Path) {
    w.write("packages/kiln-fixture-ninja/kiln_ninja_backend.py", BACKEND);
    w.write(
        "packages/kiln-fixture-ninja/pyproject.toml",
        "[build-system]\nrequires = [\"ninja\"]\nbuild-backend = \"kiln_ninja_backend\"\nbackend-path = [\".\"]\n",
    );
    w.write(
        "recipes/fixture-ninja.toml",
        &format!(
            r#"[package]
name = "fixture-ninja"
dist = "kiln-fixture-ninja"
version = "{version}"
summary = "test fixture: a real ninja build behind an in-tree backend"

[source]
path = "../packages/kiln-fixture-ninja"

[build]
requires = ["ninja"]
env = {{ KILN_TEST_HOOKS = "{hooks}", KILN_TEST_VERSION = "{{version}}", BALLAST_MIB = "{BALLAST_MIB}" }}

[verify]
imports = ["kiln_fixture_ninja"]
"#,
            hooks = hooks.display()
        ),
    );
}

fn events(logs: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(Path::new(logs).join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_ninja_build_is_watched_and_its_peak_memory_is_the_next_plans_estimate() {
    let w = World::new();
    let hooks = w.dir.path().join("hooks.txt");
    ninja_fixture(&w, "1.0.0", &hooks);
    let out = w
        .kiln()
        .env("KILN_CPUS", "2")
        .args(["install", "--json", "fixture-ninja"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}{err}", text(&out.stdout));
    assert_eq!(
        w.py("import kiln_fixture_ninja as k; print(k.VALUE)").unwrap(),
        (BALLAST_MIB << 20).to_string()
    );

    // The backend ran once: build_wheel, and nothing asked it for metadata first.
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), "build_wheel\n");
    // Its build requirement (ninja, from PyPI) went into the overlay through kiln's uv.
    assert!(err.contains("build-requires: ninja (uv pip)"), "{err}");

    // ninja's [n/N] lines drove progress events, up to 6 of 6, moving on the way.
    let v = stdout_json(&out);
    let events = events(v["logs"].as_str().unwrap());
    let progress: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e["kind"] == "progress" && e["step"] == "fixture-ninja")
        .map(|e| (e["done"].as_u64().unwrap(), e["total"].as_u64().unwrap()))
        .collect();
    assert_eq!(progress.last(), Some(&(6, 6)), "{progress:?}");
    assert!(progress.len() >= 2, "progress seen only at the end: {progress:?}");
    assert!(progress.windows(2).all(|p| p[0].0 < p[1].0), "{progress:?}");
    assert!(err.contains("fixture-ninja: wheel: 6/6 compiled"), "{err}");

    // The wheel command's peak memory, with its jobs, is in the event log and the summary line.
    let measured = events
        .iter()
        .find(|e| e["kind"] == "measured" && e["step"] == "fixture-ninja")
        .unwrap_or_else(|| panic!("no measured event: {events:?}"));
    let peak = measured["peak_memory"].as_u64().unwrap();
    let jobs = measured["jobs"].as_u64().unwrap();
    assert_eq!(jobs, 2);
    assert!(
        peak >= BALLAST_MIB << 20,
        "peak {peak} below the {BALLAST_MIB} MiB the backend held"
    );
    assert!(peak < 4 * (BALLAST_MIB << 20), "peak {peak}");
    assert!(err.contains("peak memory ") && err.contains(" with 2 jobs)"), "{err}");

    // A newer version: the plan takes the measured peak per job as its estimate and says so.
    w.edit(
        "recipes/fixture-ninja.toml",
        "version = \"1.0.0\"",
        "version = \"1.1.0\"",
    );
    let plan = w
        .kiln()
        .env("KILN_CPUS", "2")
        .args(["plan", "--json", "fixture-ninja"])
        .output()
        .unwrap();
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    let plan = stdout_json(&plan);
    let step = crate::common::step(&plan, "fixture-ninja");
    assert_eq!(step["action"], "rebuild", "{step}");
    assert_eq!(step["memory_per_job"].as_u64().unwrap(), peak.div_ceil(jobs), "{step}");
    let from = step["memory_per_job_from"].as_str().unwrap();
    assert!(
        from.starts_with("measured on ") && from.contains("with 2 jobs (fixture-ninja 1.0.0)"),
        "{from}"
    );
    let human = w
        .kiln()
        .env("KILN_CPUS", "2")
        .args(["plan", "fixture-ninja"])
        .output()
        .unwrap();
    let shown = text(&human.stdout);
    assert!(
        shown.contains("memory per job: ") && shown.contains("(measured on "),
        "{shown}"
    );
}

/// uv does the offline work too: on a node with no index and no proxy, a bundle's build
/// requirements, wheel and runtime dependencies (within kiln's constraints) come from the
/// wheelhouse through kiln's uv (`--offline --no-index --find-links`).
#[test]
fn offline_builds_and_installs_go_through_uv_and_the_wheelhouse() {
    let w = World::new();
    let (tarball, sha) = w.sdist("kiln-fixture-deps");
    w.write(
        "recipes/fixture-deps.toml",
        &format!(
            "[package]\nname = \"fixture-deps\"\ndist = \"kiln-fixture-deps\"\nversion = \"1.0.0\"\n\
             [source]\nsdist = \"{}\"\nsha256 = \"{sha}\"\n[build]\nrequires = [\"setuptools>=68\"]\n\
             [install]\ndeps = true\n[verify]\nimports = [\"kiln_fixture_deps\"]\n",
            tarball.display()
        ),
    );
    w.install_ok("fixture-deps");
    let lockfile = w.lock("fixture-deps");
    let (bundle, out) = w.bundle(&lockfile, "stack.tar");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Without kiln's wheel, so that the node builds from the sdist.
    let without = w.dir.path().join("without-wheels.tar");
    crate::common::without_built_wheels(w.dir.path(), &bundle, &without);
    std::fs::remove_file(&tarball).unwrap();

    let node = venv(&w.dir.path().join("node"));
    let cache = w.dir.path().join("node-cache");
    let mut c = w.kiln_elsewhere(&node, &cache);
    for (k, v) in [
        ("PIP_INDEX_URL", "http://127.0.0.1:9/simple"),
        ("UV_INDEX_URL", "http://127.0.0.1:9/simple"),
        ("HTTP_PROXY", "http://127.0.0.1:9"),
        ("HTTPS_PROXY", "http://127.0.0.1:9"),
        ("http_proxy", "http://127.0.0.1:9"),
        ("https_proxy", "http://127.0.0.1:9"),
    ] {
        c.env(k, v);
    }
    let out = c
        .args(["install", "--json", "--bundle"])
        .arg(&without)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}{err}", text(&out.stdout));
    assert!(
        err.contains("build-requires: setuptools>=68 (uv pip --offline)"),
        "{err}"
    );
    assert!(err.contains("install: kiln-fixture-deps (uv pip --offline)"), "{err}");
    let months = std::process::Command::new(&node)
        .args(["-c", "import kiln_fixture_deps as d; print(d.months(3))"])
        .output()
        .unwrap();
    assert_eq!(text(&months.stdout).trim(), "relativedelta(months=+3)");
    // Every uv command took its packages from the wheelhouse, and the dependencies were added
    // within kiln's constraints.
    let logs = stdout_json(&out)["logs"].as_str().unwrap().to_string();
    let commands = sh(w.dir.path(), &["grep", "-rh", "--include=*.log", "^\\$ ", &logs]);
    let wheelhouse = format!(
        "--offline --no-index --find-links {}",
        cache.join("wheelhouse").display()
    );
    let uv: Vec<&str> = commands.lines().filter(|l| l.contains("/uv pip install")).collect();
    // Two: the build requirements, then the wheel with what it lacks in one call (the wheel
    // replaced, its dependencies added within the constraints).
    assert_eq!(uv.len(), 2, "{commands}");
    assert!(uv.iter().all(|l| l.contains(&wheelhouse)), "{commands}");
    assert!(
        uv.iter()
            .any(|l| l.contains("--reinstall-package kiln-fixture-deps") && l.contains("--constraint")),
        "{commands}"
    );
}
