//! Other names for one package: a component installed under its former distribution name, or
//! by another distribution with files in the import package it owns, is reported as what it is;
//! an install replaces that distribution cleanly (one distribution per import package), and a
//! failed install puts it back.

use crate::common::{World, component, pip_install, stdout_json, step, text};

/// kiln on the renamed-package fixture recipe (`sglang-kernel`, formerly `sgl-kernel`).
fn kiln(w: &World) -> assert_cmd::Command {
    w.kiln_with(&w.dir.path().join("fixtures/former-recipes"))
}

/// `pip install` of a fixture package directory, behind kiln's back.
fn pip(w: &World, package: &std::path::Path) {
    let out = pip_install(&w.python)
        .arg("--no-build-isolation")
        .arg(package)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The installed distributions with files in `sgl_kernel/`, as `name version`, sorted.
fn owners(w: &World) -> Vec<String> {
    let code = "import importlib.metadata as m\n\
                print('\\n'.join(sorted(d.metadata['Name'] + ' ' + d.version for d in m.distributions() \
                if any(str(f).startswith('sgl_kernel/') for f in d.files or []))))";
    w.py(code).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn a_component_under_its_former_name_is_reported_as_what_it_is_and_replaced_or_put_back() {
    let w = World::new();
    pip(&w, &w.packages.join("sgl-kernel"));
    assert_eq!(owners(&w), ["sgl-kernel 0.3.21"]);

    // Not missing: the former distribution, its version, and that the recipe does not accept it.
    let out = kiln(&w).args(["doctor", "--json", "sglang-kernel"]).output().unwrap();
    let v = stdout_json(&out);
    let c = component(&v, "sglang-kernel");
    assert_eq!(c["status"], "outdated", "{c}");
    assert_eq!(c["version"], "0.3.21");
    assert_eq!(
        c["installed_as"],
        serde_json::json!({"dist": "sgl-kernel", "version": "0.3.21", "via": "former-name", "accepted": false})
    );
    let evidence = c["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with("installed as sgl-kernel 0.3.21 (sglang-kernel's former distribution name)"),
        "{evidence}"
    );
    assert!(evidence.contains("does not accept (>=0.4.2)"), "{evidence}");
    // Beside the words, the typed reasons they were rendered from: what it is installed as, and
    // the version the recipe does not accept, each with its data.
    let kinds: Vec<&str> = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[0], "installed-as", "{c}");
    let refused = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "version-not-accepted")
        .unwrap_or_else(|| panic!("{c}"));
    assert_eq!(
        (&refused["have"], &refused["accepts"], &refused["by"]),
        (
            &serde_json::json!("0.3.21"),
            &serde_json::json!(">=0.4.2"),
            &serde_json::Value::Null
        )
    );

    // The plan replaces it, and says so.
    let v = stdout_json(&kiln(&w).args(["plan", "--json", "sglang-kernel"]).output().unwrap());
    let s = step(&v, "sglang-kernel");
    assert_eq!(
        (s["action"].as_str(), s["version"].as_str()),
        (Some("rebuild"), Some("0.4.10"))
    );
    assert_eq!(s["reasons"][0]["kind"], "replace-other", "{s}");
    assert_eq!(s["reasons"][0]["other"]["dist"], "sgl-kernel", "{s}");
    assert!(
        s["reason"].as_str().unwrap().starts_with("replace sgl-kernel 0.3.21"),
        "{s}"
    );

    // A new version that fails its verification: sgl-kernel is put back, files and metadata.
    let init = "packages/sglang-kernel/sgl_kernel/__init__.py";
    let good = "VERSION = \"0.4.10\"";
    w.edit(
        init,
        good,
        "raise ImportError('sglang-kernel fixture broken on purpose')",
    );
    let out = kiln(&w).args(["install", "sglang-kernel"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("broken on purpose"), "{err}");
    assert!(err.contains("the previous sgl-kernel was restored"), "{err}");
    assert_eq!(owners(&w), ["sgl-kernel 0.3.21"]);
    assert_eq!(
        w.py("import sgl_kernel, sgl_kernel.old_only; print(sgl_kernel.VERSION)"),
        Ok("0.3.21".to_string())
    );

    // A kiln killed (-9) after the new one went in and before it finished: the next kiln puts
    // sgl-kernel back from the journal.
    w.edit(
        init,
        "raise ImportError('sglang-kernel fixture broken on purpose')",
        good,
    );
    let paused = w.dir.path().join("paused");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("kiln"))
        .arg("--recipes")
        .arg(w.dir.path().join("fixtures/former-recipes"))
        .arg("--python")
        .arg(&w.python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .args(["--no-progress", "install", "sglang-kernel"])
        .env("KILN_TEST_PAUSE_AT", format!("record:{}", paused.display()))
        .env_remove("VIRTUAL_ENV")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !paused.exists() {
        assert!(child.try_wait().unwrap().is_none(), "kiln ended before it recorded");
        assert!(start.elapsed().as_secs() < 180, "kiln never reached the record step");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(owners(&w), ["sglang-kernel 0.4.10"]);
    child.kill().unwrap();
    child.wait().unwrap();
    let out = kiln(&w).args(["doctor", "sglang-kernel"]).output().unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains("rolled back") && err.contains("the previous sgl-kernel restored"),
        "{err}"
    );
    assert_eq!(owners(&w), ["sgl-kernel 0.3.21"]);

    // The install that works leaves one distribution in sgl_kernel/: the new one, without the
    // old one's files.
    let out = kiln(&w).args(["install", "sglang-kernel"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(owners(&w), ["sglang-kernel 0.4.10"]);
    assert_eq!(
        w.py("import sgl_kernel; print(sgl_kernel.VERSION)"),
        Ok("0.4.10".to_string())
    );
    assert!(w.py("import sgl_kernel.old_only").is_err());
    let v = stdout_json(&kiln(&w).args(["doctor", "--json", "sglang-kernel"]).output().unwrap());
    let c = component(&v, "sglang-kernel");
    assert_eq!(
        (c["status"].as_str(), c["version"].as_str()),
        (Some("ok"), Some("0.4.10")),
        "{c}"
    );
    assert!(c.get("installed_as").is_none(), "{c}");
}

#[test]
fn another_distribution_with_files_in_the_package_is_broken_until_an_install_replaces_it() {
    let w = World::new();
    let out = kiln(&w).args(["install", "sglang-kernel"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A fork under a name no recipe knows, installed over it into the same directory.
    let fork = w.dir.path().join("kernel-fork");
    crate::common::copy_dir(&w.packages.join("sgl-kernel"), &fork);
    let toml = fork.join("pyproject.toml");
    let text_of = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text_of.replace("name = \"sgl-kernel\"", "name = \"kernel-fork\""),
    )
    .unwrap();
    pip(&w, &fork);
    assert_eq!(owners(&w), ["kernel-fork 0.3.21", "sglang-kernel 0.4.10"]);

    let v = stdout_json(&kiln(&w).args(["doctor", "--json", "sglang-kernel"]).output().unwrap());
    let c = component(&v, "sglang-kernel");
    assert_eq!(c["status"], "broken", "{c}");
    assert_eq!(c["sharing"][0]["dist"], "kernel-fork");
    assert_eq!(
        c["sharing"][0]["via"],
        serde_json::json!({"owns-package": "sgl_kernel"})
    );
    let evidence = c["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with(
            "sgl_kernel/ holds files of more than one distribution: sglang-kernel 0.4.10 and kernel-fork 0.3.21"
        ),
        "{evidence}"
    );

    let out = kiln(&w).args(["install", "sglang-kernel"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(owners(&w), ["sglang-kernel 0.4.10"]);
    assert_eq!(
        w.py("import sgl_kernel; print(sgl_kernel.VERSION)"),
        Ok("0.4.10".to_string())
    );
}
