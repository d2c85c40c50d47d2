//! Wheel or build, and driver against runtime, on real wheels and a real venv: a prebuilt wheel
//! (the CUDA fixture, compiled by NVIDIA's nvcc from PyPI) is read before installing and chosen
//! only when its binaries hold the target arch (or the recipe marks them optional there); the
//! plan says why either way and the chosen wheel goes through the install/verify path. A
//! distribution built for CUDA 13.2 is `blocked` under a driver for CUDA 12.8.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use crate::common::{World, component, cuda, stand_in, stdout_json, step, text};

/// Builds the CUDA fixture's wheel for `archs` ("90;120") into `out`, returning its path.
pub(crate) fn fixture_wheel(w: &World, archs: &str, out: &Path) -> PathBuf {
    let src = w.dir.path().join("wheel-src");
    crate::common::copy_dir(&w.packages.join("kiln-fixture-cuda"), &src);
    let status = crate::common::pip_wheel(&w.python, &src, out)
        .env("FIXTURE_CUDA_ARCHS", archs)
        .env("CUDA_HOME", cuda())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .unwrap()
}

pub(crate) fn sha256(path: &Path) -> String {
    let out = StdCommand::new("sha256sum").arg(path).output().unwrap();
    text(&out.stdout).split_whitespace().next().unwrap().to_string()
}

/// The fixture-cuda recipe of `w` rewritten to offer `wheel` for its version 1.0.0 (with
/// `extra` appended), written; its directory, its path and its text.
pub(crate) fn offer(w: &World, wheel: &Path, extra: &str) -> (PathBuf, PathBuf, String) {
    let recipes = w.dir.path().join("fixtures/cuda-recipes");
    let recipe = recipes.join("fixture-cuda.toml");
    let text0 = std::fs::read_to_string(&recipe).unwrap();
    let offered = text0
        .replace("version = \"1.0.0\"", "version = \"1.0.0\"\naccepts = \">=1.0\"")
        .replace(
            "[source]\npath = \"../packages/kiln-fixture-cuda\"",
            &format!(
                "[[versions]]\nversion = \"1.0.0\"\npath = \"../packages/kiln-fixture-cuda\"\n\
             wheels = [{{ url = \"{}\", sha256 = \"{}\" }}]",
                wheel.display(),
                sha256(wheel)
            ),
        )
        + extra;
    std::fs::write(&recipe, &offered).unwrap();
    (recipes, recipe, offered)
}

#[test]
fn a_prebuilt_wheel_is_installed_only_when_its_binaries_hold_the_arch() {
    let w = World::new();
    let wheels = w.dir.path().join("wheels");
    let wheel = fixture_wheel(&w, "90;120", &wheels);
    let (recipes, recipe, offered) = offer(&w, &wheel, "");
    let kiln = |args: &[&str]| {
        let mut c = w.kiln_with(&recipes);
        c.env("CUDA_HOME", cuda()).args(args);
        c.output().unwrap()
    };
    let file = wheel.file_name().unwrap().to_str().unwrap().to_string();

    // For 10.0 its one binary (sm_90, sm_120) holds nothing that loads: build from source,
    // and the plan names the binary and the arch.
    let v = stdout_json(&kiln(&["plan", "--json", "--arch", "10.0"]));
    let s = step(&v, "fixture-cuda");
    assert_eq!(s["action"], "build", "{s}");
    assert_eq!(s["prebuilt"]["install"], false, "{s}");
    assert_eq!(s["prebuilt"]["binaries"]["checked"], 1, "{s}");
    assert_eq!(
        s["prebuilt"]["reason"],
        format!(
            "builds from source: the prebuilt wheel {file} does not qualify: 1 of 1 required CUDA binary lacks a \
             kernel image: kiln_fixture_cuda/_kernels.so for 10.0: no usable image (holds sm_90, sm_120; CUDA error 209, no kernel image)"
        )
    );
    let human = text(&kiln(&["plan", "--arch", "10.0"]).stdout);
    assert!(human.contains("wheel or build ("), "{human}");

    // Optional on 10.0 by the recipe: the wheel qualifies, with the reason in the evidence.
    let mut optional = offered.clone();
    optional += "\n[[binaries.optional]]\nfiles = [\"kiln_fixture_cuda/*.so\"]\narch = [\"10.0\"]\nwhy = \"test: not for 10.0 (fixture setup.py)\"\n";
    std::fs::write(&recipe, &optional).unwrap();
    let v = stdout_json(&kiln(&["plan", "--json", "--arch", "10.0"]));
    let s = step(&v, "fixture-cuda");
    assert_eq!(s["action"], "install", "{s}");
    let reason = s["prebuilt"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("[optional: test: not for 10.0 (fixture setup.py)]"),
        "{reason}"
    );
    std::fs::write(&recipe, &offered).unwrap();

    // For 12.0 it holds sm_120: the wheel is installed (nothing compiled) and verified.
    let v = stdout_json(&kiln(&["plan", "--json", "--arch", "12.0"]));
    let s = step(&v, "fixture-cuda");
    assert_eq!(s["action"], "install", "{s}");
    assert_eq!(
        s["prebuilt"]["reason"],
        format!(
            "the prebuilt wheel {file} qualifies: every required CUDA binary holds kernels for 12.0 (1 checked); its pins fit the plan"
        )
    );
    assert!(s.get("env").is_none(), "a wheel install has no build: {s}");
    let out = kiln(&["install", "--json", "--arch", "12.0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&kiln(&["doctor", "--json", "--arch", "12.0"]));
    let c = component(&v, "fixture-cuda");
    assert_eq!(c["status"], "ok", "{c}");
    let rec = w
        .py("import importlib.metadata as m; print(m.distribution('kiln-fixture-cuda').read_text('kiln.json'))")
        .unwrap();
    let rec: serde_json::Value = serde_json::from_str(&rec).unwrap();
    assert_eq!(rec["source"], format!("wheel:{}", sha256(&wheel)));
    assert_eq!(rec["wheel_sha256"], sha256(&wheel));
}

/// After `install` of the recipe's prebuilt wheel, `lock` records the wheel (its sha256 and
/// URL, not an sdist hash: issue 19 found "the lock has the sdist with sha256 <the wheel's>" and
/// `install --locked` refusing "cannot be reproduced with these recipes"), and the lock is
/// reproduced from it: on the same node after the wheel was removed, and from a bundle on a
/// node that cannot reach it, the wheel installed as it is (nothing compiled).
#[test]
fn a_prebuilt_wheel_is_locked_as_a_wheel_and_reproduced_from_the_lock_and_a_bundle() {
    let w = World::new();
    let wheels = w.dir.path().join("wheels");
    let wheel = fixture_wheel(&w, "90;120", &wheels);
    let (recipes, _, _) = offer(&w, &wheel, "");
    let kiln = |python: &Path, cache: &Path, args: &[&str]| {
        crate::common::give_uv(cache);
        let mut c = crate::common::kiln_bare();
        c.arg("--recipes").arg(&recipes).arg("--python").arg(python);
        c.arg("--cache-dir").arg(cache).arg("--no-progress");
        c.env("CUDA_HOME", cuda()).args(args);
        c.output().unwrap()
    };
    let here = |args: &[&str]| kiln(&w.python, &w.cache, args);
    let out = here(&["install", "fixture-cuda", "--arch", "12.0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lockfile = w.dir.path().join("kiln.lock");
    let lock_arg = lockfile.display().to_string();
    let out = here(&["lock", "fixture-cuda", "-o", &lock_arg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&lockfile).unwrap();
    let sha = sha256(&wheel);
    assert!(written.contains(&format!("source = \"wheel:{sha}\"")), "{written}");
    assert!(
        written.contains(&format!("wheel_url = \"{}\"", wheel.display())),
        "{written}"
    );

    // The same node, the wheel uninstalled: --locked installs it again from the source cache.
    let status = StdCommand::new(&w.python)
        .args(["-m", "pip", "uninstall", "-y", "-q", "kiln-fixture-cuda"])
        .status()
        .unwrap();
    assert!(status.success());
    let out = here(&["install", "--json", "--locked", "--lock", &lock_arg]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["lock"]["reproduced"], true, "{v}");

    // A bundle, on a node whose only copy of the wheel is the bundle's (the original is gone).
    let bundle = w.dir.path().join("b.tar");
    let out = here(&["bundle", "--lock", &lock_arg, "-o", &bundle.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::remove_file(&wheel).unwrap();
    let node = crate::common::venv(&w.dir.path().join("node"));
    let out = kiln(
        &node,
        &w.dir.path().join("node-cache"),
        &["install", "--json", "--bundle", &bundle.display().to_string()],
    );
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    let o = v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "fixture-cuda")
        .unwrap();
    assert_eq!(o["action"], "install", "the wheel as it is, not a build: {v}");
    assert_eq!(o["source"], format!("wheel:{sha}"), "{v}");
}

#[test]
fn a_build_for_a_newer_cuda_major_than_the_driver_is_blocked() {
    let w = World::new();
    // A real installed distribution named torch whose version says it is built for CUDA 13.2
    // (the PyPI torch 2.15.0 wheel is +cu132; the real one is 539 MB).
    stand_in(&w.python, w.dir.path(), "torch", "2.15.0+cu132", "torch", &[]);
    let recipes = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let doctor = |driver: &str| {
        let mut c = w.kiln_with(&recipes);
        c.env("KILN_DRIVER_CUDA", driver).args(["doctor", "--json", "torch"]);
        stdout_json(&c.output().unwrap())
    };
    let v = doctor("12.8");
    let c = component(&v, "torch");
    assert_eq!(c["status"], "blocked", "{c}");
    let why = c["evidence"].as_str().unwrap();
    assert!(
        why.starts_with(
            "torch 2.15.0+cu132 is built for CUDA 13.2 (the version label +cu132); the driver supports CUDA 12.8 (KILN_DRIVER_CUDA)"
        ),
        "{why}"
    );
    assert!(why.contains("minor-version-compatibility"), "{why}");
    // The plan does not reinstall it: a newer driver is not kiln's to install.
    let mut c = w.kiln_with(&recipes);
    c.env("KILN_DRIVER_CUDA", "12.8").args(["plan", "--json", "torch"]);
    let out = c.output().unwrap();
    let s = step(&stdout_json(&out), "torch").clone();
    assert_eq!(s["action"], "blocked", "{s}");
    // Same major, older minor: minor version compatibility, ok with the note.
    let v = doctor("13.0");
    let c = component(&v, "torch");
    assert_eq!(c["status"], "ok", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("runs by minor version compatibility"),
        "{c}"
    );
}

#[test]
fn a_binary_only_an_unneeded_backend_uses_leaves_the_wheel_fit_and_is_named() {
    let w = World::new();
    let wheels = w.dir.path().join("wheels");
    // Its one binary holds sm_90 only; the recipe says only `--quantization fixture_fp4` uses it.
    let wheel = fixture_wheel(&w, "90", &wheels);
    let (recipes, _, _) = offer(
        &w,
        &wheel,
        "\n[[backends]]\nflag = \"--quantization\"\nvalue = \"fixture_fp4\"\nkind = \"quantization\"\nversions = \">=1.0\"\n\
         binaries = [\"kiln_fixture_cuda/_kernels*.so\"]\nwhy = \"test: its kernels are in _kernels.so (fixture setup.py)\"\n",
    );
    let kiln = |args: &[&str], need: Option<&str>| {
        let mut c = w.kiln_with(&recipes);
        c.env("CUDA_HOME", cuda()).args(args);
        if let Some(n) = need {
            c.env("KILN_NEED", n);
        }
        c.output().unwrap()
    };
    let file = wheel.file_name().unwrap().to_str().unwrap().to_string();
    let gap = "kiln_fixture_cuda/_kernels.so for 12.0: no usable image (holds sm_90; CUDA error 209, no kernel image)";

    // Nobody needs fixture_fp4: the wheel installs, and the plan names what 12.0 lacks, typed.
    let v = stdout_json(&kiln(&["plan", "--json", "--arch", "12.0"], None));
    let s = step(&v, "fixture-cuda");
    assert_eq!(s["action"], "install", "{s}");
    assert_eq!(s["prebuilt"]["install"], true, "{s}");
    let unavailable = &s["prebuilt"]["binaries"]["unavailable"];
    assert_eq!(unavailable[0]["path"], "kiln_fixture_cuda/_kernels.so", "{s}");
    assert_eq!(unavailable[0]["archs"], serde_json::json!(["12.0"]), "{s}");
    assert_eq!(
        unavailable[0]["serves"],
        serde_json::json!(["--quantization=fixture_fp4"]),
        "{s}"
    );
    assert_eq!(
        s["prebuilt"]["reason"],
        format!(
            "the prebuilt wheel {file} qualifies: every required CUDA binary holds kernels for 12.0 (1 checked, 1 only \
             for backends you do not need); not available there, since nothing you need uses it (`--need` makes it \
             required): {gap} [only --quantization=fixture_fp4 needs it]; its pins fit the plan"
        )
    );
    let human = text(&kiln(&["plan", "--arch", "12.0"], None).stdout);
    assert!(
        human.contains(
            "not available on 12.0: kiln_fixture_cuda/_kernels.so (--quantization=fixture_fp4 will not work there; \
             `--need --quantization=fixture_fp4` builds it instead)"
        ),
        "{human}"
    );

    // Needed (by flag and value, or by the bare value through KILN_NEED): the step builds, saying why.
    for (args, need) in [
        (
            &[
                "plan",
                "--json",
                "--arch",
                "12.0",
                "--need",
                "--quantization=fixture_fp4",
            ][..],
            None,
        ),
        (&["plan", "--json", "--arch", "12.0"][..], Some("fixture_fp4")),
    ] {
        let v = stdout_json(&kiln(args, need));
        let s = step(&v, "fixture-cuda");
        assert_eq!(s["action"], "build", "{s}");
        assert_eq!(s["prebuilt"]["refused"], serde_json::json!(["binaries"]), "{s}");
        assert_eq!(
            s["prebuilt"]["reason"],
            format!(
                "builds from source: the prebuilt wheel {file} does not qualify: 1 of 1 required CUDA binary lacks a \
                 kernel image: {gap} [needed by --quantization=fixture_fp4, which you need]"
            )
        );
    }

    // A need no backend has: a usage error that lists the known ones.
    let out = kiln(&["plan", "--arch", "12.0", "--need", "fixture_fp8"], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("--need `fixture_fp8`: no backend of cuda-toolkit, fixture-cuda is called that; known: --quantization=fixture_fp4"),
        "{err}"
    );

    // Installed without the need: doctor says ok and names the gap; with it, wrong-arch.
    let out = kiln(&["install", "--json", "--arch", "12.0"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&kiln(&["doctor", "--json", "--arch", "12.0"], None));
    let c = component(&v, "fixture-cuda");
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(
        c["unavailable"][0]["serves"],
        serde_json::json!(["--quantization=fixture_fp4"]),
        "{c}"
    );
    assert!(c["evidence"].as_str().unwrap().contains(gap), "{c}");
    let v = stdout_json(&kiln(&["doctor", "--json", "--arch", "12.0"], Some("fixture_fp4")));
    let c = component(&v, "fixture-cuda");
    assert_eq!(c["status"], "wrong-arch", "{c}");
}
