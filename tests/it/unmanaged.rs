//! A distribution no recipe manages is still judged by its CUDA binaries (issue 22 item 3): a
//! real wheel holding a real shared object compiled by NVIDIA's nvcc (PyPI) for sm_90 only, SASS
//! without PTX, installed behind kiln's back as the dependency of a kiln install would be; after
//! `kiln install`, `doctor` names it for 12.0 (no image loads there: SASS does not cross majors
//! and there is no PTX to JIT), typed, with the binary and what it holds, and calls it fine for
//! 9.0. A distribution a recipe manages is judged as that component, not here.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use crate::common::{World, cuda, pip_install, pip_wheel, stdout_json, text};

/// The wheel of `kiln-fixture-kernels` 1.0.0: one package with `_scale.so`, nvcc's shared
/// library of the fixture kernel for `gencode`.
fn kernel_wheel(w: &World, gencode: &str) -> PathBuf {
    let pkg = w.dir.path().join("kiln-fixture-kernels");
    let module = pkg.join("kiln_fixture_kernels");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::write(
        pkg.join("pyproject.toml"),
        "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
         [project]\nname = \"kiln-fixture-kernels\"\nversion = \"1.0.0\"\n\
         [tool.setuptools]\npackages = [\"kiln_fixture_kernels\"]\n\
         [tool.setuptools.package-data]\nkiln_fixture_kernels = [\"*.so\"]\n",
    )
    .unwrap();
    std::fs::write(module.join("__init__.py"), "").unwrap();
    let st = StdCommand::new(cuda().join("bin/nvcc"))
        .args(["-shared", "-Xcompiler", "-fPIC", "-gencode", gencode, "-o"])
        .arg(module.join("_scale.so"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/scale.cu"))
        .status()
        .unwrap();
    assert!(st.success(), "nvcc failed");
    let out = w.dir.path().join("wheels");
    let built = pip_wheel(&w.python, &pkg, &out).output().unwrap();
    assert!(built.status.success(), "{}", text(&built.stderr));
    let wheel = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .unwrap();
    assert!(
        wheel
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("kiln_fixture_kernels-1.0.0-")
    );
    wheel
}

fn unmanaged<'a>(v: &'a serde_json::Value, dist: &str) -> Option<&'a serde_json::Value> {
    v["unmanaged"].as_array()?.iter().find(|u| u["dist"] == dist)
}

#[test]
fn doctor_names_an_unmanaged_distribution_whose_binaries_lack_the_target_arch() {
    let w = World::new();
    let wheel = kernel_wheel(&w, "arch=compute_90,code=sm_90");
    let out = pip_install(&w.python).arg(&wheel).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // An install by kiln, beside it.
    let out = w
        .kiln()
        .args(["install", "--arch", "12.0", "fixture-pure"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));

    let doctor = |arch: &str| {
        let out = w
            .kiln()
            .args(["doctor", "--json", "--arch", arch, "fixture-pure"])
            .output()
            .unwrap();
        (out.status.code(), stdout_json(&out))
    };
    let (code, v) = doctor("12.0");
    // The component asked for is ok; the unmanaged distribution is named beside it.
    assert_eq!(code, Some(0), "{v}");
    let u = unmanaged(&v, "kiln-fixture-kernels").unwrap_or_else(|| panic!("{}", v["unmanaged"]));
    assert_eq!(
        (&u["version"], &u["status"]),
        (&"1.0.0".into(), &"wrong-arch".into()),
        "{u}"
    );
    let kinds: Vec<&str> = u["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["not-managed", "images-missing"], "{u}");
    let missing = &u["reasons"][1];
    assert_eq!(missing["archs"], serde_json::json!(["12.0"]), "{u}");
    assert_eq!(missing["binaries"][0]["path"], "kiln_fixture_kernels/_scale.so", "{u}");
    assert_eq!(missing["binaries"][0]["archs"], serde_json::json!(["12.0"]), "{u}");
    let why = "kiln_fixture_kernels/_scale.so for 12.0: no usable image (holds sm_90; CUDA error 209, no kernel image)";
    let evidence = u["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with(
            "kiln-fixture-kernels 1.0.0 is installed and no recipe manages it: judged by its CUDA binaries alone; \
             1 of 1 required CUDA binary lacks a kernel image: "
        ) && evidence.contains(why),
        "{evidence}"
    );
    // The seed packages hold no CUDA code, and fixture-pure is a component: neither is listed.
    assert_eq!(v["unmanaged"].as_array().unwrap().len(), 1, "{}", v["unmanaged"]);
    // A person reads the same.
    let human = text(
        &w.kiln()
            .args(["doctor", "--arch", "12.0", "fixture-pure"])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(
        human.contains("not managed by kiln (CUDA binaries read for the target archs)"),
        "{human}"
    );
    let line = human
        .lines()
        .find(|l| l.trim_start().starts_with("kiln-fixture-kernels"))
        .unwrap_or_else(|| panic!("{human}"));
    assert!(line.contains("wrong-arch") && line.contains(why), "{line}");
    assert!(
        human.contains("1 distribution no recipe manages lacks a kernel image for the target archs"),
        "{human}"
    );

    // 9.0: its sm_90 image loads there.
    let (_, v) = doctor("9.0");
    let u = unmanaged(&v, "kiln-fixture-kernels").unwrap_or_else(|| panic!("{}", v["unmanaged"]));
    assert_eq!(u["status"], "ok", "{u}");
    assert_eq!(u["reasons"][1]["kind"], "images-held", "{u}");
    assert_eq!(u["reasons"][1]["checked"], 1, "{u}");
}

#[test]
fn a_distribution_a_recipe_manages_is_judged_as_its_component_not_as_unmanaged() {
    let w = World::new();
    let wheel = kernel_wheel(&w, "arch=compute_90,code=sm_90");
    let out = pip_install(&w.python).arg(&wheel).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    w.write(
        "recipes/fixture-kernels.toml",
        "[package]\nname = \"fixture-kernels\"\ndist = \"kiln-fixture-kernels\"\nversion = \"1.0.0\"\n\
         summary = \"test fixture: a kernel package\"\n\
         [source]\npath = \"../packages/kiln-fixture-pure\"\n\
         [verify]\nimports = [\"kiln_fixture_kernels\"]\n",
    );
    let out = w
        .kiln()
        .args(["doctor", "--json", "--arch", "12.0", "fixture-pure"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert!(unmanaged(&v, "kiln-fixture-kernels").is_none(), "{}", v["unmanaged"]);
    let out = w
        .kiln()
        .args(["doctor", "--json", "--arch", "12.0", "fixture-kernels"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let c = crate::common::component(&v, "fixture-kernels");
    assert_eq!(c["status"], "wrong-arch", "{c}");
}
