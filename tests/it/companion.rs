//! A distribution a component pulls in for its CUDA binaries (flashinfer-cubin for flashinfer:
//! `companions` in recipes/flashinfer.toml) is judged per target arch like the component's own
//! binaries: its cubins read by the cubin reader, each arch either held or named as missing, with
//! the images it holds, typed, in `doctor` and `plan` (text and `--json`).
//!
//! Ground truth: flashinfer 0.7.2 reads its cubins from the flashinfer-cubin package when its
//! version matches (`flashinfer/jit/env.py:94-135` `_get_cubin_dir`) and loads each by file name
//! (`flashinfer/jit/cubin_loader.py:207-233` `get_artifact`, which downloads a file the package
//! lacks); flashinfer-cubin ships them as bare `.cubin` files. The fixture's cubins are real:
//! compiled by NVIDIA's nvcc (PyPI) with `-cubin` for sm_100a and sm_90, so 10.0 and 9.0 load one
//! and 12.0 none (an `a` image loads only on its exact arch; SASS does not cross majors).

use std::path::Path;
use std::process::Command as StdCommand;

use crate::common::{World, component, cuda, pip_install, stdout_json, step, text};

const RECIPE: &str = r#"[package]
name = "fixture-fi"
dist = "kiln-fixture-fi"
version = "1.0.0"
summary = "test fixture: flashinfer's part, a component that uses a cubin package"
companions = ["kiln-fixture-cubin"]
companions_why = "test: like flashinfer/jit/env.py:79-90"

[source]
path = "../packages/kiln-fixture-fi"

[verify]
imports = ["kiln_fixture_fi"]
"#;

/// Installs `name==version` (module `module`) with the files `data` (relative path, bytes) in its
/// package, behind kiln's back.
fn install_package(w: &World, name: &str, version: &str, module: &str, data: &[(&str, Vec<u8>)]) {
    let pkg = w.dir.path().join(format!("{name}-{version}"));
    std::fs::create_dir_all(pkg.join(module)).unwrap();
    std::fs::write(
        pkg.join("pyproject.toml"),
        format!(
            "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
             [project]\nname = \"{name}\"\nversion = \"{version}\"\n\
             [tool.setuptools]\npackages = [\"{module}\"]\n\
             [tool.setuptools.package-data]\n{module} = [\"cubins/*.cubin\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(
        pkg.join(module).join("__init__.py"),
        format!("__version__ = \"{version}\"\n"),
    )
    .unwrap();
    for (rel, bytes) in data {
        let p = pkg.join(module).join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    let out = pip_install(&w.python)
        .arg("--no-build-isolation")
        .arg(&pkg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A real cubin of the fixture's `scale` kernel for `arch` ("sm_100a"), compiled by nvcc.
fn cubin(w: &World, arch: &str) -> Vec<u8> {
    let out = w.dir.path().join(format!("scale-{arch}.cubin"));
    let st = StdCommand::new(cuda().join("bin/nvcc"))
        .args(["-cubin", &format!("-arch={arch}"), "-o"])
        .arg(&out)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/scale.cu"))
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(out).unwrap()
}

fn kinds(c: &serde_json::Value) -> Vec<String> {
    c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_companions_cubins_are_judged_per_target_arch() {
    let w = World::new();
    w.write("recipes/fixture-fi.toml", RECIPE);
    install_package(&w, "kiln-fixture-fi", "1.0.0", "kiln_fixture_fi", &[]);
    let cubins = [
        ("cubins/scale_sm100a.cubin", cubin(&w, "sm_100a")),
        ("cubins/scale_sm90.cubin", cubin(&w, "sm_90")),
    ];
    install_package(&w, "kiln-fixture-cubin", "1.0.0", "kiln_fixture_cubin", &cubins);
    let doctor = |arch: &str| {
        let out = w
            .kiln()
            .args(["doctor", "--json", "--arch", arch, "fixture-fi"])
            .output()
            .unwrap();
        stdout_json(&out)
    };

    // 10.0: the sm_100a cubin loads there; held, typed, and the companion's binaries are listed.
    let v = doctor("10.0");
    let c = component(&v, "fixture-fi");
    assert_eq!(c["status"], "ok", "{c}");
    let held = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "companion-images-held")
        .unwrap_or_else(|| panic!("{c}"));
    assert_eq!(
        (&held["arch"], &held["files"], &held["of"]),
        (&"10.0".into(), &1.into(), &2.into()),
        "{c}"
    );
    let listed = v["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["dist"] == "kiln-fixture-cubin");
    assert!(listed, "{}", v["binaries"]);

    // 12.0: no cubin loads there: named, with what it holds; a note, not a failure.
    let v = doctor("12.0");
    let c = component(&v, "fixture-fi");
    assert_eq!(c["status"], "ok", "{c}");
    let missing = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "companion-images-missing")
        .unwrap_or_else(|| panic!("{c}"));
    assert_eq!(missing["arch"], "12.0");
    assert_eq!(missing["held"], serde_json::json!(["sm_100a", "sm_90"]), "{c}");
    let why = "kiln-fixture-cubin 1.0.0 holds no cubin that loads on 12.0 (it holds sm_100a, sm_90): \
               what fixture-fi would load from it there is not in it";
    assert!(c["evidence"].as_str().unwrap().contains(why), "{c}");
    let human = text(
        &w.kiln()
            .args(["doctor", "--arch", "12.0", "fixture-fi"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(human.contains(why), "{human}");
    // The plan keeps it and says the same, typed.
    let plan = stdout_json(
        &w.kiln()
            .args(["plan", "--json", "--arch", "12.0", "fixture-fi"])
            .output()
            .unwrap(),
    );
    let s = step(&plan, "fixture-fi");
    assert_eq!(s["action"], "keep", "{s}");
    assert!(s.to_string().contains("companion-images-missing"), "{s}");
    assert!(s["reason"].as_str().unwrap().contains(why), "{s}");
    let human = text(
        &w.kiln()
            .args(["plan", "--arch", "12.0", "fixture-fi"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(human.contains(why), "{human}");

    // At another version it is ignored: that is what is said, not what its cubins hold.
    install_package(&w, "kiln-fixture-cubin", "0.9.0", "kiln_fixture_cubin", &cubins);
    let c = component(&doctor("12.0"), "fixture-fi").clone();
    let k = kinds(&c);
    assert!(k.contains(&"companion-ignored".to_string()), "{c}");
    assert!(!k.iter().any(|k| k.starts_with("companion-images")), "{c}");
}
