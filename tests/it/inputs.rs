//! Declared build inputs, end to end with real git repositories (one with a submodule) and a
//! real archive and a real wheel made by the test (files of the wheel placed under a path of the
//! input's directory, as vLLM's `FMHA_SM100_SRC_DIR` input takes `python/fmha_sm100` out of the
//! release wheel): the plan lists them with their pinned identity and the
//! variables that point the build at them; offline with an empty cache each missing one is named
//! before anything runs; the build gets them (and no network, where the machine can deny it);
//! `kiln.json`, the lock and a bundle carry them, and a node with no origin builds from the
//! bundle. A build that still reaches out is named with the host it tried.

use std::path::{Path, PathBuf};

use crate::common::{World, git, sh, stdout_json, text, venv};

/// What the test made: the git input (a repository with a submodule), its commit, the
/// submodule's repository, the archive and its sha256.
pub(crate) struct Inputs {
    repo: PathBuf,
    commit: String,
    sub: PathBuf,
    archive: PathBuf,
    sha: String,
    wheel: PathBuf,
    wheel_sha: String,
}

/// The package: its build reads two inputs through the variables the recipe declares, and
/// records which network devices it saw.
const SETUP: &str = r#"import os, pathlib
from setuptools import setup

headers = pathlib.Path(os.environ["FIXTURE_HEADERS_DIR"])
blob = pathlib.Path(os.environ["FIXTURE_BLOB_DIR"])
msa = pathlib.Path(os.environ["FIXTURE_MSA_DIR"])
devices = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
pathlib.Path("kiln_fixture_inputs").mkdir(exist_ok=True)
pathlib.Path("kiln_fixture_inputs/__init__.py").write_text(
    f"ANSWER = {(headers / 'include/answer.h').read_text().strip()!r}\n"
    f"SUB = {(headers / 'third_party/sub/data.txt').read_text().strip()!r}\n"
    f"BLOB = {(blob / 'value.txt').read_text().strip()!r}\n"
    f"MSA = {(msa / 'python/msa/api.py').read_text().strip()!r}\n"
    f"MSA_FILES = {sorted(str(p.relative_to(msa)) for p in msa.rglob('*') if p.is_file())!r}\n"
    f"ARGS = {os.environ['FIXTURE_ARGS']!r}\n"
    f"DEVICES = {devices!r}\n"
)
setup(name="kiln-fixture-inputs", version="1.0.0", packages=["kiln_fixture_inputs"])
"#;

pub(crate) fn make_inputs(w: &World) -> Inputs {
    let root = w.dir.path();
    let sub = root.join("sub-repo");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("data.txt"), "from the submodule\n").unwrap();
    sh(&sub, &["git", "init", "-q"]);
    git(&sub, &["add", "."]);
    git(&sub, &["commit", "-qm", "sub"]);

    let repo = root.join("headers-repo");
    std::fs::create_dir_all(repo.join("include")).unwrap();
    std::fs::write(repo.join("include/answer.h"), "42\n").unwrap();
    sh(&repo, &["git", "init", "-q"]);
    git(
        &repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub.to_str().unwrap(),
            "third_party/sub",
        ],
    );
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "v1"]);
    sh(&repo, &["git", "tag", "v1.0"]);
    let commit = sh(&repo, &["git", "rev-parse", "HEAD"]);

    let blob = root.join("blob-1.0/data");
    std::fs::create_dir_all(&blob).unwrap();
    std::fs::write(blob.join("value.txt"), "7\n").unwrap();
    let archive = root.join("blob-1.0.tar.gz");
    sh(root, &["tar", "-czf", archive.to_str().unwrap(), "blob-1.0"]);
    let sha = sh(root, &["sha256sum", archive.to_str().unwrap()])
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    // A wheel whose `pkg/third_party/msa/` member is the input; the rest of the wheel is not.
    let wheel = root.join("pkg-1.0-py3-none-any.whl");
    sh(
        root,
        &[
            "python3",
            "-c",
            "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w')\nz.writestr('pkg/third_party/msa/api.py', 'API = 1\\n')\nz.writestr('pkg/third_party/msa/cute/k.py', 'K = 2\\n')\nz.writestr('pkg/other.py', 'no\\n')\nz.close()",
            wheel.to_str().unwrap(),
        ],
    );
    let wheel_sha = sh(root, &["sha256sum", wheel.to_str().unwrap()])
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    Inputs {
        repo,
        commit,
        sub,
        archive,
        sha,
        wheel,
        wheel_sha,
    }
}

impl Inputs {
    /// The three `[[build.inputs]]` tables of a fixture recipe, each with its `env` (the inside
    /// of the inline table, `{path}` for the input's directory) and why the build reads it.
    pub(crate) fn toml(&self, env: [&str; 3], why: [&str; 3]) -> String {
        format!(
            r#"[[build.inputs]]
name = "headers"
git = "{repo}"
rev = "{commit}"
tag = "v1.0"
submodules = true
env = {{ {e0} }}
why = "{w0}"

[[build.inputs]]
name = "blob"
archive = "{archive}"
sha256 = "{sha}"
subdir = "data"
env = {{ {e1} }}
why = "{w1}"

[[build.inputs]]
name = "msa"
wheel = "{wheel}"
sha256 = "{wheel_sha}"
member = "pkg/third_party/msa/"
place = "python/msa/"
env = {{ {e2} }}
why = "{w2}"
"#,
            repo = self.repo.display(),
            commit = self.commit,
            archive = self.archive.display(),
            sha = self.sha,
            wheel = self.wheel.display(),
            wheel_sha = self.wheel_sha,
            e0 = env[0],
            e1 = env[1],
            e2 = env[2],
            w0 = why[0],
            w1 = why[1],
            w2 = why[2],
        )
    }
}

fn recipe(w: &World, i: &Inputs, setup: &str) {
    w.write("packages/kiln-fixture-inputs/setup.py", setup);
    let inputs = i.toml(
        [
            r#"FIXTURE_HEADERS_DIR = "{path}", FIXTURE_ARGS = "-DHEADERS={path}""#,
            r#"FIXTURE_BLOB_DIR = "{path}", FIXTURE_ARGS = "-DBLOB={path}""#,
            r#"FIXTURE_MSA_DIR = "{path}""#,
        ],
        [
            "setup.py reads FIXTURE_HEADERS_DIR (test fixture)",
            "setup.py reads FIXTURE_BLOB_DIR (test fixture)",
            "setup.py reads FIXTURE_MSA_DIR/python/msa (test fixture)",
        ],
    );
    w.write(
        "recipes/fixture-inputs.toml",
        &format!(
            r#"[package]
name = "fixture-inputs"
dist = "kiln-fixture-inputs"
version = "1.0.0"
summary = "test fixture: a build that needs two declared inputs"

[source]
path = "../packages/kiln-fixture-inputs"

{inputs}
[verify]
imports = ["kiln_fixture_inputs"]
"#
        ),
    );
}

fn module(python: &Path) -> serde_json::Value {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import json, kiln_fixture_inputs as m; print(json.dumps({k: getattr(m, k) for k in ('ANSWER', 'SUB', 'BLOB', 'MSA', 'MSA_FILES', 'ARGS', 'DEVICES')}))",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether this machine lets an unprivileged build run in a network namespace of its own.
pub(crate) fn namespaces_work() -> bool {
    std::process::Command::new("unshare")
        .args(["-rn", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn declared_inputs_are_planned_fetched_without_the_network_locked_and_bundled() {
    let w = World::new();
    let i = make_inputs(&w);
    recipe(&w, &i, SETUP);

    // The plan lists each input with its pinned identity, and the variables point at them.
    let out = w.kiln().args(["plan", "fixture-inputs", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = stdout_json(&out);
    let step = crate::common::step(&plan, "fixture-inputs");
    assert_eq!(step["action"], "build", "{step}");
    let inputs = step["inputs"].as_array().unwrap();
    assert_eq!(inputs[0]["name"], "headers");
    assert_eq!(inputs[0]["rev"], i.commit.as_str());
    assert_eq!(inputs[0]["tag"], "v1.0");
    assert_eq!(inputs[1]["name"], "blob");
    assert_eq!(inputs[1]["sha256"], i.sha.as_str());
    assert_eq!(inputs[2]["name"], "msa");
    assert_eq!(inputs[2]["wheel"], i.wheel.display().to_string());
    assert_eq!(inputs[2]["sha256"], i.wheel_sha.as_str());
    assert_eq!(inputs[2]["member"], "pkg/third_party/msa/");
    assert_eq!(inputs[2]["place"], "python/msa/");
    assert_eq!(step["env"]["FIXTURE_HEADERS_DIR"], "<input headers>");
    assert_eq!(
        step["env"]["FIXTURE_ARGS"],
        "-DHEADERS=<input headers> -DBLOB=<input blob>"
    );
    assert_eq!(step["network"], "denied");

    // Offline with an empty cache: blocked before anything runs, each missing input named.
    let out = w
        .kiln()
        .args(["install", "--offline", "--json", "fixture-inputs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains(&format!(
            "build input `headers`: the git repository {} is not in the source cache",
            i.repo.display()
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "build input `blob`: the archive {} is not in the source cache",
            i.archive.display()
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "build input `msa`: the wheel {} is not in the source cache",
            i.wheel.display()
        )),
        "{all}"
    );
    assert!(w.py("import kiln_fixture_inputs").is_err());

    // Online: fetched first, the build reads them (the submodule from its own mirror).
    let out = w.kiln().args(["install", "fixture-inputs"]).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let m = module(&w.python);
    assert_eq!(m["ANSWER"], "42");
    assert_eq!(m["SUB"], "from the submodule");
    assert_eq!(m["BLOB"], "7");
    // Only the member, under its place: the wheel's other files are not in the input.
    assert_eq!(m["MSA"], "API = 1");
    assert_eq!(
        m["MSA_FILES"],
        serde_json::json!(["python/msa/api.py", "python/msa/cute/k.py"])
    );
    let args = m["ARGS"].as_str().unwrap();
    assert!(
        args.starts_with("-DHEADERS=") && args.contains("/inputs/blob/"),
        "{args}"
    );
    if namespaces_work() {
        assert_eq!(
            m["DEVICES"],
            serde_json::json!(["lo"]),
            "the build ran without the network"
        );
    } else {
        eprintln!("unshare -rn does not work here: the network-denial assertion is skipped");
    }

    // kiln.json and the lock record what each input was.
    let lockfile = w.lock("fixture-inputs");
    let lock = std::fs::read_to_string(&lockfile).unwrap();
    assert!(lock.contains(&format!("headers = \"git:{}\"", i.commit)), "{lock}");
    assert!(lock.contains(&format!("blob = \"sha256:{}\"", i.sha)), "{lock}");
    assert!(lock.contains(&format!("msa = \"sha256:{}\"", i.wheel_sha)), "{lock}");

    // The bundle carries the archive and both mirrors (the submodule's too).
    let bundle = w.dir.path().join("inputs.tar");
    let out = w
        .kiln()
        .args(["bundle", "--json", "--lock"])
        .arg(&lockfile)
        .arg("-o")
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let entries = crate::common::bundle_entries(&v);
    assert!(entries.contains(&format!("sources/{}", i.sha).as_str()), "{v}");
    assert!(entries.contains(&format!("sources/{}", i.wheel_sha).as_str()), "{v}");
    assert_eq!(entries.iter().filter(|e| e.starts_with("git/")).count(), 2, "{v}");

    // Another node, with no origin left: it builds from the bundle (its wheel left out).
    for gone in [&i.repo, &i.sub, &i.archive, &i.wheel] {
        std::fs::rename(gone, gone.with_extension("gone")).unwrap();
    }
    let without = w.dir.path().join("without-wheels.tar");
    crate::common::without_built_wheels(w.dir.path(), &bundle, &without);
    let node = venv(&w.dir.path().join("node"));
    let out = w
        .kiln_elsewhere(&node, &w.dir.path().join("node-cache"))
        .args(["install", "--json", "--bundle"])
        .arg(&without)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert!(
        v["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["name"] == "fixture-inputs" && o["action"] == "build" && o["result"] == "done"),
        "{v}"
    );
    assert_eq!(module(&node)["SUB"], "from the submodule");
    assert_eq!(module(&node)["MSA"], "API = 1");
}

#[test]
fn a_build_that_still_downloads_is_named_with_the_host_it_tried() {
    let w = World::new();
    let i = make_inputs(&w);
    let fetching = SETUP.replace(
        "from setuptools import setup\n",
        "from setuptools import setup\nimport subprocess\n\
         subprocess.run(['git', 'ls-remote', 'https://kiln-test.invalid/triton.git'], check=True)\n",
    );
    recipe(&w, &i, &fetching);
    let out = w.kiln().args(["install", "fixture-inputs"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains("the build tried to reach kiln-test.invalid: it downloads a source the recipe does not declare"),
        "{all}"
    );
    assert!(all.contains("[[build.inputs]]"), "{all}");
}

/// `kiln cache add-mirror` seeds the mirror of a URL that cannot be reached (`example.invalid`
/// never resolves, RFC 2606) from a local repository; ground truth: the repository's own tag and
/// commit. An online install then checks the pinned commit out of the seeded mirror: it must not
/// fail on the `git fetch` that cannot reach the origin, because the commit is already there.
#[test]
fn a_seeded_mirror_serves_a_pinned_commit_online_and_offline() {
    let w = World::new();
    let i = make_inputs(&w);
    let url = "https://example.invalid/headers.git";

    let out = w
        .kiln()
        .args(["cache", "add-mirror", "--json", url])
        .arg(w.dir.path().join("no-repo-here"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "not a repository: refused");
    assert!(
        text(&out.stderr).contains("is not a git repository"),
        "{}",
        text(&out.stderr)
    );

    let out = w
        .kiln()
        .args(["cache", "add-mirror", "--json", url])
        .arg(&i.repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["url"], url);
    assert_eq!(v["commits"], 1);
    assert_eq!(v["tags"], serde_json::json!([["v1.0", i.commit]]), "{v}");
    assert!(
        std::path::Path::new(v["mirror"].as_str().unwrap())
            .join("HEAD")
            .is_file()
    );

    w.write(
        "packages/kiln-fixture-seeded/setup.py",
        r#"import os, pathlib
from setuptools import setup
h = pathlib.Path(os.environ["FIXTURE_HEADERS_DIR"])
pathlib.Path("kiln_fixture_seeded").mkdir(exist_ok=True)
pathlib.Path("kiln_fixture_seeded/__init__.py").write_text(f"ANSWER = {(h / 'include/answer.h').read_text().strip()!r}\n")
setup(name="kiln-fixture-seeded", version="1.0.0", packages=["kiln_fixture_seeded"])
"#,
    );
    w.write(
        "recipes/fixture-seeded.toml",
        &format!(
            r#"[package]
name = "fixture-seeded"
dist = "kiln-fixture-seeded"
version = "1.0.0"
summary = "test fixture: a build input from a seeded mirror"

[source]
path = "../packages/kiln-fixture-seeded"

[[build.inputs]]
name = "headers"
git = "{url}"
rev = "{commit}"
tag = "v1.0"
env = {{ FIXTURE_HEADERS_DIR = "{{path}}" }}
why = "setup.py reads FIXTURE_HEADERS_DIR (test fixture)"

[verify]
imports = ["kiln_fixture_seeded"]
"#,
            commit = i.commit,
        ),
    );
    let out = w.kiln().args(["install", "fixture-seeded"]).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        w.py("import kiln_fixture_seeded as m; print(m.ANSWER)").unwrap().trim(),
        "42"
    );
}

/// Offline, every mirror a git input lacks is named at once, a submodule's as a submodule of
/// its parent, each with the command that seeds it. Ground truth: vLLM 0.26.0 offline through
/// kiln (docs/gpu-proof.md §17): with DeepGEMM's mirror seeded, its two submodule mirrors
/// (NVIDIA/cutlass, fmtlib/fmt) were named one per run, fmt only after cutlass was seeded, and
/// nothing said how to seed a mirror without the network.
#[test]
fn offline_every_missing_submodule_mirror_is_named_with_the_way_to_seed_it() {
    let w = World::new();
    let repo = |name: &str| {
        let dir = w.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q"]);
        std::fs::write(dir.join("f"), name).unwrap();
        git(&dir, &["add", "f"]);
        git(&dir, &["commit", "-q", "-m", name]);
        (dir.clone(), git(&dir, &["rev-parse", "HEAD"]).trim().to_string())
    };
    let (a, a_commit) = repo("sub-a");
    let (_, b_commit) = repo("sub-b");
    let (parent, _) = repo("parent");
    std::fs::write(
        parent.join(".gitmodules"),
        "[submodule \"a\"]\n\tpath = a\n\turl = https://example.invalid/a.git\n\
         [submodule \"b\"]\n\tpath = b\n\turl = https://example.invalid/b.git\n",
    )
    .unwrap();
    git(&parent, &["add", ".gitmodules"]);
    for (path, commit) in [("a", &a_commit), ("b", &b_commit)] {
        git(
            &parent,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{commit},{path}"),
            ],
        );
    }
    git(&parent, &["commit", "-q", "-m", "submodules"]);
    let rev = git(&parent, &["rev-parse", "HEAD"]).trim().to_string();
    let seed = |url: &str, dir: &Path| {
        let out = w.kiln().args(["cache", "add-mirror", url]).arg(dir).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    seed("https://example.invalid/parent.git", &parent);
    w.write(
        "recipes/fixture-subs.toml",
        &format!(
            "[package]\nname = \"fixture-subs\"\ndist = \"kiln-fixture-pure\"\nversion = \"1.0.0\"\n\
             summary = \"test fixture\"\n\n[source]\npath = \"../packages/kiln-fixture-pure\"\n\n\
             [[build.inputs]]\nname = \"parent\"\ngit = \"https://example.invalid/parent.git\"\nrev = \"{rev}\"\n\
             submodules = true\nenv = {{ FIXTURE_PARENT = \"{{path}}\" }}\nwhy = \"test fixture\"\n\n\
             [verify]\nimports = [\"kiln_fixture_pure\"]\n"
        ),
    );
    let reason = || {
        let out = w
            .kiln()
            .args(["plan", "--offline", "--json", "fixture-subs"])
            .output()
            .unwrap();
        let v = stdout_json(&out);
        let s = crate::common::step(&v, "fixture-subs").clone();
        assert_eq!(s["action"], "blocked", "{s}");
        s["reason"].as_str().unwrap().to_string()
    };
    let r = reason();
    for name in ["a", "b"] {
        assert!(
            r.contains(&format!(
                "the git repository https://example.invalid/{name}.git (submodule `{name}` of https://example.invalid/parent.git) \
                 is not in the source cache (seed it from a local clone or bare repository: \
                 `kiln cache add-mirror https://example.invalid/{name}.git DIR`)"
            )),
            "{r}"
        );
    }
    seed("https://example.invalid/a.git", &a);
    let r = reason();
    assert!(!r.contains("/a.git"), "{r}");
    assert!(r.contains("submodule `b` of"), "{r}");
}
