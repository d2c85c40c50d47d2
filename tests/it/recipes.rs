//! Recipe files: the embedded set, and malformed files reported at file:line:col.

use crate::common::{kiln_bare, stdout_json, text};

fn write(dir: &std::path::Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).unwrap();
}

#[test]
fn embedded_recipes_list_all_fourteen_components() {
    let out = kiln_bare().args(["recipes", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v = stdout_json(&out);
    let mut names: Vec<&str> = v["recipes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cuda-toolkit",
            "cutlass-dsl",
            "flash-attn",
            "flash-attn-4",
            "flashinfer",
            "flashinfer-cubin",
            "sgl-deep-gemm",
            "sgl-flash-mla",
            "sglang",
            "sglang-kernel",
            "sglang-router",
            "smg",
            "torch",
            "vllm"
        ]
    );
}

#[test]
fn malformed_recipes_report_every_problem_with_its_position() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bad");
    std::fs::create_dir(&dir).unwrap();
    write(
        &dir,
        "torch.toml",
        "[package]\nname = \"torch\"\nversion = \"2.14.1\"\n[source]\nwheel = \"torch==2.14.1\"\n",
    );
    write(
        &dir,
        "many.toml",
        r#"[package]
name = "many"
verison = "1.0"
version = 1
summary = "four problems in one file"

[source]
path = "."

[depends]
torch = ">=2.7.*"
flashinfr = "*"

[build]
env = { ARCH = "{arch.tensorrt}", JOBS = "{jobs}" }
"#,
    );
    write(&dir, "syntax.toml", "[package]\nname = \"syntax\"\nversion = \"1\n");
    write(
        &dir,
        "misnamed.toml",
        "[package]\nname = \"other\"\nversion = \"1\"\n[source]\npath = \".\"\n",
    );
    let out = kiln_bare()
        .current_dir(tmp.path())
        .args(["recipes", "--recipes", "bad"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("malformed_recipes", text(&out.stderr));

    let out = kiln_bare()
        .current_dir(tmp.path())
        .args(["recipes", "--json", "--recipes", "bad"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let first = &v["errors"][0];
    assert_eq!(
        (
            first["file"].as_str().unwrap(),
            first["line"].as_u64().unwrap(),
            first["column"].as_u64().unwrap()
        ),
        ("bad/many.toml", 3, 1)
    );
}

#[test]
fn cross_file_problems_name_the_dependency_and_the_cycle() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    std::fs::create_dir(&dir).unwrap();
    let r = |name: &str, dep: &str| {
        format!("[package]\nname = \"{name}\"\nversion = \"1\"\n[source]\npath = \".\"\n[depends]\n{dep} = \"*\"\n")
    };
    write(&dir, "a.toml", &r("a", "b"));
    write(&dir, "b.toml", &r("b", "c"));
    write(&dir, "c.toml", &r("c", "a"));
    let out = kiln_bare()
        .current_dir(tmp.path())
        .args(["recipes", "--recipes", "r"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("recipe_cycle", text(&out.stderr));

    write(&dir, "c.toml", &r("c", "torch"));
    let out = kiln_bare()
        .current_dir(tmp.path())
        .args(["plan", "--recipes", "r"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("recipe_unknown_dependency", text(&out.stderr));
}

#[test]
fn usage_errors_exit_2_with_a_suggestion() {
    let out = kiln_bare().args(["plan", "sglng", "--arch", "12.0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        "error: no recipe named `sglng` (did you mean `sglang`?); `kiln recipes` lists them"
    );
    let out = kiln_bare().args(["plan", "--arch", "banana"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`banana` is not a GPU arch"));
    let out = kiln_bare()
        .args(["plan", "flashinfer[nope]", "--arch", "12.0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`flashinfer` has no feature `nope` (it has: cutedsl)"));
    let out = kiln_bare()
        .args(["plan", "torch; python_version < '3'", "--arch", "12.0"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a marker is refused, never silently ignored"
    );
    assert!(text(&out.stderr).contains("markers on targets are not supported"));
}

#[test]
fn the_device_fixture_uses_the_embedded_torch_and_toolkit_recipes_and_loads() {
    // bench/device-run-4.sh proves the pipeline on an H200 with these recipes: the torch and
    // CUDA toolkit ones must be the real ones, not look-alikes (they are symbolic links to them;
    // this fails if a copy ever replaces a link and drifts).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["torch.toml", "cuda-toolkit.toml"] {
        assert_eq!(
            std::fs::read_to_string(root.join("bench/torchext/recipes").join(name)).unwrap(),
            std::fs::read_to_string(root.join("recipes").join(name)).unwrap(),
            "{name}"
        );
    }
    let out = kiln_bare()
        .args(["recipes", "--json", "--recipes"])
        .arg(root.join("bench/torchext/recipes"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert!(v["recipes"].as_array().unwrap().iter().any(|r| r["name"] == "torchext"));
}

/// One file per kind of problem the parser reports (and one good file they depend on), so that
/// every message, position and help text is pinned: wrong types named as TOML names them, header
/// positions, the source rules, versions, rules, backends, build commands and distribution names.
pub const PROBLEMS: &[(&str, &str)] = &[
    (
        "torch.toml",
        "[package]\nname = \"torch\"\nversion = \"2.14.1\"\n[source]\nwheel = \"torch==2.14.1\"\n",
    ),
    (
        "types.toml",
        "[package]\nname = \"types\"\nversion = \"1\"\nsummary = { text = \"x\" }\n[source]\npath = \".\"\n[depends]\ntorch = 3\n[[build]]\nx = 1\n[verify]\nimports = [\"ok\", 2, \"9bad\"]\n",
    ),
    (
        "sources.toml",
        "[package]\nname = \"sources\"\nversion = \"1\"\n[source]\nsdist = \"https://example.org/s.tar.gz\"\ngit = \"https://example.org/s.git\"\n",
    ),
    (
        "nosource.toml",
        "[package]\nname = \"nosource\"\n[[versions]]\nversion = \"1\"\n[[versions]]\nversion = \"not a version\"\npath = \".\"\n",
    ),
    (
        "sha.toml",
        "[package]\nname = \"sha\"\nversion = \"1\"\n[source]\nsdist = \"https://example.org/s.tar.gz\"\n",
    ),
    (
        "toolkit.toml",
        "[package]\nname = \"toolkit\"\nkind = \"cuda-toolkit\"\n[source]\npath = \".\"\n",
    ),
    (
        "rules.toml",
        "[package]\nname = \"rules\"\nversion = \"1\"\n[source]\npath = \".\"\n[requires]\ncuda = \"twelve\"\npython = \">=3.10,\"\n[[requires.rule]]\nwhy = \"w\"\n[[requires.rule]]\narch = [\"banana\"]\ncuda = \">=12.8\"\n",
    ),
    (
        "backends.toml",
        "[package]\nname = \"backends\"\nversion = \"1\"\n[source]\npath = \".\"\n[[backends]]\nvalue = \"v\"\nneeds = [\"torch>=2\"]\narch = [\"9.0\", \"x\"]\ncuda = \"new\"\nwhy = \"w\"\n",
    ),
    (
        "versions.toml",
        "versions = [{ version = \"1\" }]\n[package]\nname = \"versions\"\n[source]\npath = \".\"\n",
    ),
    (
        "build.toml",
        "[package]\nname = \"build\"\nversion = \"1\"\n[source]\npath = \".\"\n[build]\nrequires = [\"not a requirement!\"]\nenv = { A = 1, B = \"{nope}\" }\nprepare = [[\"{python}\", 1], []]\nwheel = []\nmemory_per_job = \"lots\"\n",
    ),
    ("dotted.toml", "package.name = \"dotted\"\nsource.path = \".\"\n"),
    (
        "dist.toml",
        "[package]\nname = \"dist\"\ndist = \"bad name!\"\nversion = \"1\"\n[source]\npath = \".\"\n",
    ),
    (
        "header.toml",
        "[package]\nversion = \"1\"\n[source]\npath = \".\"\n[features]\nx = 1\n[features.y]\nimports = [\"y\"]\nsummary = \"y\"\nextra = true\n",
    ),
];

#[test]
fn every_kind_of_problem_is_reported_where_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("problems");
    std::fs::create_dir(&dir).unwrap();
    for (name, body) in PROBLEMS {
        write(&dir, name, body);
    }
    let out = kiln_bare()
        .current_dir(tmp.path())
        .args(["recipes", "--recipes", "problems"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("every_kind_of_problem", text(&out.stderr));
}

/// `kiln recipes | head -0`: a reader that goes away early ends kiln quietly, never in a panic.
#[test]
fn a_closed_pipe_ends_kiln_quietly() {
    let bin = assert_cmd::cargo::cargo_bin("kiln");
    let mut child = std::process::Command::new(bin)
        .arg("recipes")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}
