//! A lock reproduces for the archs it was made for, whatever GPU the node has: `kiln lock`
//! without `--arch` locks the archs kiln installed the components for (not the GPUs found, none
//! on a connected machine), and `install --locked`/`--bundle` take the lock's archs and say so,
//! unless `--arch` names others: then those, said so, with the archs' difference a note.
//! Ground truth: the project's H200 proof (`bench/h200/make-bundle.sh` installs for 9.0,12.0 and
//! runs `kiln lock` without `--arch` on a machine without a GPU; `run.sh install` on the H200
//! exited 1 after recompiling flashinfer: "cutlass-dsl archs: the lock has 9.0, 12.0, the
//! environment has 9.0", issue 19). Here a node without a GPU stands for the node with another.

use std::path::Path;

use crate::common::{World, stdout_json, text, venv};

fn install_locked(w: &World, python: &Path, cache: &Path, args: &[&str]) -> std::process::Output {
    w.kiln_elsewhere(python, cache)
        .args(["install"])
        .args(args)
        .output()
        .unwrap()
}

/// fixture-cext's outcome in `install --json`.
fn cext_outcome(v: &serde_json::Value) -> &serde_json::Value {
    v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "fixture-cext")
        .unwrap_or_else(|| panic!("no fixture-cext outcome: {v}"))
}

/// A world with fixture-cext (an sdist with a C extension) installed by kiln for 9.0 and 12.0.
fn cext_for_two_archs() -> World {
    let w = World::new();
    w.remote_sources();
    let out = w
        .kiln()
        .args(["install", "fixture-cext", "--arch", "9.0,12.0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    w
}

#[test]
fn a_lock_and_its_bundle_reproduce_for_the_locked_archs_and_use_the_bundled_wheel() {
    let w = cext_for_two_archs();

    // Written without --arch on a machine without a GPU: the archs kiln installed it for.
    let lockfile = w.dir.path().join("kiln.lock");
    let out = w
        .kiln()
        .args(["lock", "fixture-cext", "--json", "-o"])
        .arg(&lockfile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(
        v["lock"]["environment"]["archs"],
        serde_json::json!(["9.0", "12.0"]),
        "{v}"
    );

    // A fresh venv: the lock's archs, said so, and reproduced.
    let fresh = venv(&w.dir.path().join("fresh"));
    let lock_arg = lockfile.display().to_string();
    let out = install_locked(&w, &fresh, &w.cache, &["--locked", "--lock", &lock_arg]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "target 9.0, 12.0: the archs of {lock_arg} (it reproduces them; --arch names others)"
        )),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("reproduced {lock_arg}")), "{stdout}");

    // A lock as the H200 proof's was written (no [environment] archs, its components built for
    // 9.0 and 12.0), bundled with the built wheel: another node takes the components' archs, so
    // the wheel key is the lock's and the bundled wheel installs without compiling.
    let old = std::fs::read_to_string(&lockfile)
        .unwrap()
        .replacen("archs = [\"9.0\", \"12.0\"]", "archs = []", 1);
    let bare = w.dir.path().join("bare.lock");
    std::fs::write(&bare, &old).unwrap();
    let (bundle, out) = w.bundle(&bare, "b.tar");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let node = venv(&w.dir.path().join("node"));
    let out = install_locked(
        &w,
        &node,
        &w.dir.path().join("node-cache"),
        &["--json", "--bundle", &bundle.display().to_string()],
    );
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["archs_from"], "lock components", "{v}");
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    let cext = cext_outcome(&v);
    assert_eq!(cext["from_cache"], true, "the bundled wheel, not a compile: {v}");

    // --arch naming other archs than the lock's wins (issue 19: "take the lock's archs unless
    // --arch is given"), and says so: what was built for 9.0 and 12.0 is built again for 9.0,
    // and the lock is reproduced in all but its archs, whose difference is a note.
    let other = venv(&w.dir.path().join("other"));
    let args = ["--locked", "--lock", &lock_arg, "--arch", "9.0"];
    let out = install_locked(&w, &other, &w.cache, &args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "target 9.0 (--arch), not the lock's 9.0, 12.0: what was built for those is built again for 9.0, and {lock_arg} is reproduced in all but its archs"
        )),
        "{stdout}"
    );
    // Again on the same cache, which now holds the wheel built for 9.0 (not the lock's hash):
    // taken, not refused as a foreign wheel.
    let again = venv(&w.dir.path().join("again"));
    let out = install_locked(&w, &again, &w.cache, &args);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let other = venv(&w.dir.path().join("other-json"));
    let mut json = vec!["--json"];
    json.extend(args);
    let out = install_locked(&w, &other, &w.dir.path().join("other-cache"), &json);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["archs_from"], "--arch over the lock's", "{v}");
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    let archs = v["lock"]["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["field"] == "archs")
        .unwrap_or_else(|| panic!("no archs difference: {v}"));
    assert_eq!(
        (&archs["locked"], &archs["found"], &archs["note_only"]),
        (&"9.0, 12.0".into(), &"9.0".into(), &true.into()),
        "{v}"
    );
    let cext = cext_outcome(&v);
    assert!(
        cext["action"] == "build" && cext["from_cache"] != true,
        "built again for 9.0: {v}"
    );
}

/// A lock whose component is `installed` (kiln did not install it; a bundle leaves it out) on
/// a node without it fails before anything is installed. Ground truth: issue 19, "A bundle fails
/// late": a lock whose torch is `installed` installed cutlass-dsl on a node without torch, then
/// failed, the node half-changed. six plays torch (a recipe installing it from the index, as
/// torch's does; installed here behind kiln's back), fixture-cext plays cutlass-dsl.
#[test]
fn a_bundle_checks_what_the_node_must_bring_before_changing_anything() {
    let w = World::new();
    w.remote_sources();
    w.write(
        "recipes/fixture-six.toml",
        "[package]\nname = \"fixture-six\"\ndist = \"six\"\naccepts = \">=1.10\"\nsummary = \"test fixture\"\n\n\
         [[versions]]\nversion = \"1.17.0\"\nwheel = \"six==1.17.0\"\n\n[verify]\nimports = [\"six\"]\n",
    );
    w.write(
        "recipes/fixture-needs-six.toml",
        "[package]\nname = \"fixture-needs-six\"\ndist = \"kiln-fixture-pure\"\nversion = \"1.0.0\"\n\
         summary = \"test fixture\"\n\n[source]\npath = \"../packages/kiln-fixture-pure\"\n\n\
         [depends]\nfixture-six = \">=1.10\"\n\n[verify]\nimports = [\"kiln_fixture_pure\"]\n",
    );
    let status = crate::common::pip_install(&w.python)
        .arg("six==1.17.0")
        .status()
        .unwrap();
    assert!(status.success());
    let out = w
        .kiln()
        .args(["install", "fixture-cext", "fixture-needs-six"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let lockfile = w.dir.path().join("kiln.lock");
    let out = w
        .kiln()
        .args(["lock", "fixture-cext", "fixture-needs-six", "-o"])
        .arg(&lockfile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&lockfile).unwrap();
    assert!(written.contains("source = \"installed\""), "{written}");
    let (bundle, out) = w.bundle(&lockfile, "b.tar");
    assert!(out.status.success(), "{}", text(&out.stderr));

    let node = venv(&w.dir.path().join("node"));
    let freeze = || crate::common::sh(w.dir.path(), &[node.to_str().unwrap(), "-m", "pip", "freeze"]);
    let before = freeze();
    let out = install_locked(
        &w,
        &node,
        &w.dir.path().join("node-cache"),
        &["--bundle", &bundle.display().to_string()],
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("fixture-six 1.17.0 (here: not installed)") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(before, freeze(), "the node is as it was");
}

/// A bundle's built wheel installs on a node whose host compiler differs from the build host's:
/// the lock names the wheel by its sha256, and the compiler (like the interpreter's patch
/// version) decides how it was made, not where it runs. Ground truth: the H200 proof of
/// 2026-12-02 (docs/gpu-proof.md §10): the lock and bundle were made with g++ 12.2.0 and Python
/// 3.12.1, the H200 has `CXX` = g++ 13.3.0 and Python 3.12.3, and `install --bundle` compiled
/// flashinfer again for 115 s instead of taking the bundled wheel.
#[test]
fn a_bundled_wheel_installs_on_a_node_with_another_host_compiler() {
    let w = cext_for_two_archs();
    let lockfile = w.dir.path().join("kiln.lock");
    let out = w
        .kiln()
        .args(["lock", "fixture-cext", "-o"])
        .arg(&lockfile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (bundle, out) = w.bundle(&lockfile, "b.tar");
    assert!(out.status.success(), "{}", text(&out.stderr));

    // The node's C++ compiler says another version (the H200's `CXX` is such a wrapper).
    let cxx = w.dir.path().join("g++-node");
    std::fs::write(
        &cxx,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'g++-real (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0'; exit 0; fi\nexec g++ \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&cxx, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let node = venv(&w.dir.path().join("node"));
    let out = w
        .kiln_elsewhere(&node, &w.dir.path().join("node-cache"))
        .env("CXX", &cxx)
        .args(["install", "--json", "--bundle"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    let cext = cext_outcome(&v);
    assert_eq!(cext["from_cache"], true, "the bundled wheel, not a compile: {v}");
    let note = cext.to_string();
    assert!(
        note.contains("installed the wheel the lock names (built with "),
        "{note}"
    );
}
