//! Unit tests of build inputs and the per-version `prepare`/`imports`: a recipe that declares
//! them (recipe-wide and per version, merged by name), and each kind of mistake at its place.

use super::*;
use crate::recipe::inputs::{InputSource, Submodules};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn recipe() -> String {
    format!(
        r#"[package]
name = "demo"

[build]
prepare = [["{{python}}", "tools/prep.py"]]

[[build.inputs]]
name = "cutlass"
git = "https://example.invalid/cutlass.git"
rev = "{COMMIT}"
tag = "v4.7.1"
env = {{ DEMO_CUTLASS_SRC_DIR = "{{path}}" }}
why = "CMakeLists.txt:526 FetchContent_Declare(cutlass GIT_TAG v4.7.1)"

[[build.inputs]]
name = "kernels"
archive = "https://example.invalid/kernels-1.0.tar.gz"
sha256 = "{sha}"
subdir = "python/kernels"
arch = ["9.0"]
env = {{ CMAKE_ARGS = "-DFETCHCONTENT_SOURCE_DIR_KERNELS={{path}}" }}
why = "cmake/kernels.cmake:20"

[verify]
imports = ["demo", "demo._C_stable"]

[[versions]]
version = "2.0"
sdist = "https://example.invalid/demo-2.0.tar.gz"
sha256 = "{sha}"

[[versions]]
version = "1.0"
sdist = "https://example.invalid/demo-1.0.tar.gz"
sha256 = "{sha}"
prepare = [["{{python}}", "prep.py"]]
imports = ["demo", "demo._C"]

[[versions.inputs]]
name = "cutlass"
git = "https://example.invalid/cutlass.git"
rev = "{old}"
env = {{ DEMO_CUTLASS_SRC_DIR = "{{path}}" }}
why = "CMakeLists.txt:300"
"#,
        sha = "ab".repeat(32),
        old = "f".repeat(40),
    )
}

#[test]
fn inputs_prepare_and_imports_are_read_and_merged_per_version() {
    let r = parse("demo.toml", &recipe(), None).unwrap();
    assert_eq!(r.build.inputs.len(), 2);
    let cutlass = &r.build.inputs[0];
    assert_eq!(
        cutlass.from,
        InputSource::Git {
            git: "https://example.invalid/cutlass.git".into(),
            rev: Some(COMMIT.into()),
            tag: Some("v4.7.1".into()),
            submodules: Submodules::None,
        }
    );
    assert_eq!(
        cutlass.env["DEMO_CUTLASS_SRC_DIR"].render("/w/in/cutlass"),
        "/w/in/cutlass"
    );
    assert!(r.build.denies_network(), "a build with inputs runs without the network");
    let kernels = &r.build.inputs[1];
    assert_eq!(kernels.subdir.as_deref(), Some("python/kernels"));
    assert_eq!(kernels.arch.as_ref().map(Vec::len), Some(1));

    let v = |s: &str| s.parse::<pep440_rs::Version>().unwrap();
    let new = r.build_of(Some(&v("2.0")));
    assert!(matches!(new, std::borrow::Cow::Borrowed(_)), "2.0 changes nothing");
    let old = r.build_of(Some(&v("1.0")));
    assert_eq!(old.prepare[0][1].raw(), "prep.py");
    let names: Vec<&str> = old.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["cutlass", "kernels"], "its own cutlass in the recipe's place");
    assert!(
        matches!(&old.inputs[0].from, InputSource::Git { rev: Some(rev), tag: None, .. } if rev == &"f".repeat(40))
    );
    assert_eq!(r.imports_of(Some(&v("1.0"))), ["demo", "demo._C"]);
    assert_eq!(r.imports_of(Some(&v("2.0"))), ["demo", "demo._C_stable"]);
    assert_eq!(r.imports_of(None), ["demo", "demo._C_stable"]);
    assert_eq!(r.all_imports(), ["demo", "demo._C_stable", "demo._C"]);
    let json = serde_json::to_value(&r.build).unwrap();
    assert_eq!(json["inputs"][0]["git"], "https://example.invalid/cutlass.git");
    assert_eq!(json["inputs"][0]["rev"], COMMIT);
    assert_eq!(
        json["inputs"][1]["archive"],
        "https://example.invalid/kernels-1.0.tar.gz"
    );
    assert_eq!(
        json["inputs"][1]["env"]["CMAKE_ARGS"],
        "-DFETCHCONTENT_SOURCE_DIR_KERNELS={path}"
    );
}

#[test]
fn the_network_rule_can_be_stated_either_way() {
    let allowed = recipe().replace("[build]\n", "[build]\nnetwork = true\n");
    assert!(!parse("demo.toml", &allowed, None).unwrap().build.denies_network());
    let plain = "[package]\nname = \"p\"\nversion = \"1\"\n[source]\npath = \".\"\n";
    assert!(!parse("p.toml", plain, None).unwrap().build.denies_network());
    let denied = format!("{plain}[build]\nnetwork = false\n");
    assert!(parse("p.toml", &denied, None).unwrap().build.denies_network());
}

#[test]
fn every_mistake_in_an_input_is_reported_at_its_place() {
    let src = recipe()
        .replacen(&format!("rev = \"{COMMIT}\""), "rev = \"v4.7.1\"", 1)
        .replacen(
            "DEMO_CUTLASS_SRC_DIR = \"{path}\" }",
            "DEMO_CUTLASS_SRC_DIR = \"{src}/x\" }",
            1,
        )
        .replacen("subdir = \"python/kernels\"", "subdir = \"../up\"\ncolour = 1", 1)
        .replacen("why = \"cmake/kernels.cmake:20\"", "", 1)
        .replacen("name = \"kernels\"", "name = \"Kernels\"", 1)
        .replace(
            &format!("rev = \"{}\"", "f".repeat(40)),
            &format!("rev = \"{}\"\nsha256 = \"x\"", "f".repeat(40)),
        );
    let errs = parse("demo.toml", &src, None).unwrap_err().diags;
    let msgs: Vec<&str> = errs.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "`rev` of a build input must be a full commit, found `v4.7.1`",
            "`{src}` in an input's env: only `{path}` is known here",
            "unknown key `colour` in [build.inputs]",
            "bad build input name `Kernels`",
            "`build.inputs.subdir` must be a relative path inside the input, found `../up`",
            "missing key `build.inputs.why`",
            "`sha256` belongs to an `archive` input, not a `git` one",
        ]
    );
    let at = |i: usize, text: &str| {
        let d = &errs[i];
        let line = src.lines().nth(d.line - 1).unwrap();
        assert!(line[d.column - 1..].starts_with(text), "{}: {line}", d.message);
    };
    at(0, "\"v4.7.1\"");
    at(1, "{src}");
    at(2, "colour");
    at(3, "\"Kernels\"");
    at(4, "\"../up\"");
    at(5, "[[build.inputs]]");
    at(6, "\"x\"");
    for (from, to, says) in [
        (
            "name = \"kernels\"",
            "name = \"cutlass\"",
            "build input `cutlass` is declared twice",
        ),
        (
            "subdir = \"python/kernels\"",
            "git = \"https://x\"",
            "names more than one of `git`, `archive` and `wheel`",
        ),
        ("arch = [\"9.0\"]", "arch = []", "`arch = []`"),
        (
            "CMAKE_ARGS = \"-DFETCHCONTENT_SOURCE_DIR_KERNELS={path}\"",
            "CMAKE_ARGS = \"/abs\"",
            "must contain `{path}`",
        ),
        (
            "env = { CMAKE_ARGS",
            "envy = { CMAKE_ARGS",
            "missing key `build.inputs.env`",
        ),
    ] {
        let src = recipe().replacen(from, to, 1);
        let errs = parse("demo.toml", &src, None).unwrap_err().diags;
        assert!(errs.iter().any(|d| d.message.contains(says)), "{to}: {errs:?}");
    }
}

/// The wheel-file input: parsed with its member and place; each mistake at its own place.
#[test]
fn a_wheel_file_input_names_its_wheel_sha256_member_and_place() {
    let sha = "a".repeat(64);
    let good = format!(
        r#"[package]
name = "demo"
version = "1.0"

[source]
path = "."

[[build.inputs]]
name = "msa"
wheel = "https://example.invalid/demo-1.0-py3-none-any.whl"
sha256 = "{sha}"
member = "demo/third_party/msa/"
place = "python/msa/"
env = {{ MSA_SRC_DIR = "{{path}}" }}
why = "cmake/msa.cmake:5 MSA_SRC_DIR (test)"
"#
    );
    let r = parse("demo.toml", &good, None).unwrap();
    assert_eq!(
        r.build.inputs[0].from,
        InputSource::Wheel {
            wheel: "https://example.invalid/demo-1.0-py3-none-any.whl".into(),
            sha256: sha.clone(),
            member: "demo/third_party/msa/".into(),
            place: "python/msa/".into(),
        }
    );
    for (from, to, says, at) in [
        (
            "place = \"python/msa/\"",
            "place = \"../up/\"",
            "`build.inputs.place` must be a relative path",
            "\"../up/\"",
        ),
        (
            "-py3-none-any.whl\"",
            "-py3-none-any.zip\"",
            "is not a wheel",
            "\"https://",
        ),
        (
            "member = \"demo/third_party/msa/\"\n",
            "",
            "missing key `build.inputs.member`",
            "\"https://",
        ),
        (
            "place = \"python/msa/\"",
            "place = \"python/msa/\"\nsubdir = \"x\"",
            "`subdir` does not belong to a `wheel` input",
            "\"x\"",
        ),
        (
            "place = \"python/msa/\"",
            "place = \"python/msa/\"\ngit = \"https://x\"",
            "more than one of",
            "[[build.inputs]]",
        ),
    ] {
        let src = good.replacen(from, to, 1);
        let errs = parse("demo.toml", &src, None).unwrap_err().diags;
        let d = errs
            .iter()
            .find(|d| d.message.contains(says))
            .unwrap_or_else(|| panic!("{to}: {errs:?}"));
        let line = src.lines().nth(d.line - 1).unwrap();
        assert!(line[d.column - 1..].starts_with(at), "{}: {line}", d.message);
    }
}
