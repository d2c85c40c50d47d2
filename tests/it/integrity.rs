//! Hostile input: locks, bundles and cache entries from elsewhere are data, checked before
//! anything is trusted. A lock value of the wrong shape is refused at its line, a git rev never
//! reaches git as an option, a wheel that is not the one its hash names is refused and moved
//! aside, a bundle holds only what its lock names and is unpacked by kiln's own rules.

use std::path::PathBuf;

use crate::common::{World, text};

/// A lock of fixture-pure from `source`, for the world's Python.
fn lock_of(w: &World, source: &str) -> PathBuf {
    let python = w.py("import platform; print(platform.python_version())").unwrap();
    let path = w.dir.path().join("hostile.lock");
    std::fs::write(
        &path,
        format!(
            "format = 1\n\n[environment]\npython = \"{python}\"\narchs = []\n\n[[component]]\nname = \"fixture-pure\"\nversion = \"1.0.0\"\nsource = \"{source}\"\n"
        ),
    )
    .unwrap();
    path
}

fn installed(w: &World, module: &str) -> bool {
    w.py(&format!("import {module}")).is_ok()
}

#[test]
fn hostile_lock_values_are_refused_at_their_line_before_anything_runs() {
    let w = World::new();
    let (_repo, _commit) = w.git_pure();
    let outside = w.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "not for the bundle").unwrap();
    for source in [
        "git:--orphan=x".to_string(),
        format!("sha256:{}", outside.display()),
        "sha256:../../outside".to_string(),
    ] {
        let lock = lock_of(&w, &source);
        let out = w
            .kiln()
            .args(["install", "--locked", "--lock"])
            .arg(&lock)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{source}: {err}{}", text(&out.stdout));
        assert!(err.contains(&format!("{}:10:10", lock.display())), "{source}: {err}");
        assert!(err.contains("help:"), "{source}: {err}");
        assert!(!installed(&w, "kiln_fixture_pure"), "{source}");

        let bundle = w.dir.path().join("out.tar");
        let out = w
            .kiln()
            .args(["bundle", "--lock"])
            .arg(&lock)
            .arg("-o")
            .arg(&bundle)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{source}: {}", text(&out.stderr));
        assert!(!bundle.exists(), "{source}: a bundle was written");
    }
}

#[test]
fn a_git_rev_that_looks_like_an_option_is_never_passed_as_one() {
    let w = World::new();
    let (repo, _commit) = w.git_pure();
    w.use_source(
        "fixture-pure",
        &format!("git = \"{}\"\nrev = \"--orphan=x\"", repo.display()),
    );
    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!installed(&w, "kiln_fixture_pure"), "{all}");
    assert!(all.contains("no commit, tag or branch `--orphan=x`"), "{all}");
}
