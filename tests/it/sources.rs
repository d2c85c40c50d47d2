//! Source kinds other than a local path: a git repository the test creates, an sdist checked
//! against its sha256, and installing through uv when it is on PATH.

use std::process::Command as StdCommand;

use crate::common::{World, stdout_json, text};

fn sh(dir: &std::path::Path, args: &[&str]) -> String {
    let out = StdCommand::new(args[0])
        .args(&args[1..])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// git with a fixed identity, in a repository the test owns.
fn git(repo: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["git", "-c", "user.name=kiln", "-c", "user.email=kiln@test"];
    all.extend_from_slice(args);
    sh(repo, &all)
}

fn use_source(w: &World, recipe: &str, source: &str) {
    let p = w.recipes.join(format!("{recipe}.toml"));
    let body = std::fs::read_to_string(&p).unwrap();
    let start = body.find("[source]").unwrap();
    let end = body[start + 1..].find("\n[").map_or(body.len(), |i| start + 1 + i);
    std::fs::write(&p, format!("{}[source]\n{source}\n{}", &body[..start], &body[end..])).unwrap();
}

#[test]
fn git_source_at_a_tag_records_the_commit() {
    let w = World::new();
    let repo = w.dir.path().join("pure-repo");
    crate::common::copy_dir(&w.packages.join("kiln-fixture-pure"), &repo);
    sh(&repo, &["git", "init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "v1"]);
    sh(&repo, &["git", "tag", "v1.0.0"]);
    let commit = sh(&repo, &["git", "rev-parse", "HEAD"]);
    // A later commit that must not be what gets built.
    std::fs::write(
        repo.join("kiln_fixture_pure/words.py"),
        "raise ImportError('not the tag')\n",
    )
    .unwrap();
    git(&repo, &["commit", "-qam", "later"]);
    use_source(
        &w,
        "fixture-pure",
        &format!("git = \"{}\"\nrev = \"v1.0.0\"", repo.display()),
    );

    let out = w.kiln().args(["install", "--json", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["outcomes"][0]["source"], format!("git:{commit}"));
    assert_eq!(
        w.py("from kiln_fixture_pure import greet; print(greet('git'))")
            .unwrap(),
        "hello, git"
    );
}

#[test]
fn sdist_source_is_checked_against_its_sha256() {
    let w = World::new();
    let tarball = w.dir.path().join("kiln-fixture-pure-1.0.0.tar.gz");
    sh(
        &w.packages,
        &["tar", "-czf", tarball.to_str().unwrap(), "kiln-fixture-pure"],
    );
    let sha = sh(w.dir.path(), &["sha256sum", tarball.to_str().unwrap()])
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();

    let wrong = "0".repeat(64);
    use_source(
        &w,
        "fixture-pure",
        &format!("sdist = \"{}\"\nsha256 = \"{wrong}\"", tarball.display()),
    );
    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "sha256 mismatch for {}: the recipe pins {wrong}, the file has {sha}",
            tarball.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("nothing was installed; the environment is unchanged"),
        "{err}"
    );
    assert!(w.py("import kiln_fixture_pure").is_err());

    use_source(
        &w,
        "fixture-pure",
        &format!("sdist = \"{}\"\nsha256 = \"{sha}\"", tarball.display()),
    );
    let out = w.kiln().args(["install", "--json", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stdout_json(&out)["outcomes"][0]["source"], format!("sha256:{sha}"));
    assert!(
        w.cache.join("sources").join(&sha).is_dir(),
        "the checked archive is cached by its hash"
    );
}

#[test]
fn installs_with_uv_when_uv_is_on_path() {
    let w = World::new();
    // uv from PyPI, in a separate venv so it is not part of the environment kiln manages.
    let tools = w.dir.path().join("tools");
    let tools_py = crate::common::venv(&tools);
    let st = StdCommand::new(&tools_py)
        .args(["-m", "pip", "install", "--quiet", "uv"])
        .status()
        .unwrap();
    assert!(st.success());
    let path = format!(
        "{}:{}",
        tools.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = w
        .kiln()
        .env("PATH", &path)
        .args(["install", "fixture-app"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("install: kiln-fixture-app (uv pip)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        w.py("import kiln_fixture_app; print(kiln_fixture_app.run())").unwrap(),
        "hello, 42"
    );
    let installer = w
        .py("import importlib.metadata as m; print(m.distribution('kiln-fixture-app').read_text('INSTALLER').strip())")
        .unwrap();
    assert_eq!(installer, "uv");
}
