//! The lockfile: `kiln lock` records a proven environment; `kiln install --locked` reproduces
//! it on a fresh venv (the locked git commit, not where the tag points now), rebuilds what was
//! built from another source, and refuses what it cannot reproduce, with the reason.

use std::path::Path;

use crate::common::{World, git, sh, stdout_json, text, venv};

/// `kiln install --locked --lock FILE ARGS...` for `python`.
fn install_locked(w: &World, python: &Path, lockfile: &Path, args: &[&str]) -> std::process::Output {
    w.kiln_for(python)
        .args(["install", "--locked", "--lock"])
        .arg(lockfile)
        .args(args)
        .output()
        .unwrap()
}

/// Moves tag v1.0.0 to a new commit whose greeting differs; returns that commit.
fn retag_with_new_greeting(repo: &Path) -> String {
    std::fs::write(
        repo.join("kiln_fixture_pure/words.py"),
        "def greet(name):\n    return f'moved tag, {name}'\n",
    )
    .unwrap();
    git(repo, &["commit", "-qam", "same version, other code"]);
    sh(repo, &["git", "tag", "-f", "v1.0.0"]);
    sh(repo, &["git", "rev-parse", "HEAD"])
}

fn greet(python: &Path) -> String {
    let out = std::process::Command::new(python)
        .args(["-c", "from kiln_fixture_pure import greet; print(greet('lock'))"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

#[test]
fn a_lock_is_reproduced_on_a_fresh_venv_at_the_locked_commit() {
    let w = World::new();
    let (repo, commit) = w.git_pure();
    let out = w.kiln().args(["install"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lockfile = w.dir.path().join("kiln.lock");
    let out = w.kiln().args(["lock", "--json", "-o"]).arg(&lockfile).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let names: Vec<&str> = v["lock"]["component"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fixture-app", "fixture-cext", "fixture-pure"]);
    let written = std::fs::read_to_string(&lockfile).unwrap();
    assert!(written.starts_with("# kiln.lock"), "{written}");
    assert!(written.contains(&format!("source = \"git:{commit}\"")), "{written}");

    // The tag moves on; a fresh node reproducing the lock still gets the locked commit.
    let moved = retag_with_new_greeting(&repo);
    assert_ne!(moved, commit);
    let fresh = venv(&w.dir.path().join("fresh"));
    let out = install_locked(&w, &fresh, &lockfile, &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!("reproduced {}: 3 components match it", lockfile.display())),
        "{stdout}"
    );
    assert_eq!(greet(&fresh), "hello, lock");

    // A plain install from the recipes would now build the moved tag; the lock names the old
    // commit, so an environment built from the new one is stale and rebuilt from the lock.
    let other = venv(&w.dir.path().join("other"));
    let out = w.kiln_for(&other).args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(greet(&other), "moved tag, lock");
    let out = install_locked(&w, &other, &lockfile, &["--json", "fixture-pure"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    let rebuilt = &v["outcomes"][0];
    assert_eq!(
        (rebuilt["name"].as_str(), rebuilt["source"].as_str()),
        (Some("fixture-pure"), Some(format!("git:{commit}").as_str())),
        "{v}"
    );
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    assert_eq!(greet(&other), "hello, lock");

    // The original environment already is the lock: nothing to build, and it says so.
    let out = install_locked(&w, &w.python, &lockfile, &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("nothing to do"), "{stdout}");
    assert!(stdout.contains("3 components match it"), "{stdout}");
}

#[test]
fn what_cannot_be_locked_or_reproduced_is_refused_with_the_reason() {
    let w = World::new();
    let out = w.kiln().args(["install"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lockfile = w.dir.path().join("kiln.lock");

    // A broken component: no lock is written.
    let so = std::fs::read_dir(w.site_packages().join("kiln_fixture_cext"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "so"))
        .unwrap();
    let saved = std::fs::read(&so).unwrap();
    std::fs::remove_file(&so).unwrap();
    let out = w.kiln().args(["lock", "-o"]).arg(&lockfile).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("cannot lock an environment that is not proven"), "{err}");
    assert!(err.contains("fixture-cext is broken"), "{err}");
    assert!(!lockfile.exists());
    std::fs::write(&so, saved).unwrap();
    let out = w.kiln().args(["lock", "-o"]).arg(&lockfile).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let good = std::fs::read_to_string(&lockfile).unwrap();

    // A malformed lock: file:line:col.
    std::fs::write(&lockfile, good.replacen("version = \"1.0.0\"", "version = 1.0", 1)).unwrap();
    let out = install_locked(&w, &w.python, &lockfile, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("malformed_lock", w.redact(&text(&out.stderr)));

    // A version the recipes no longer describe.
    std::fs::write(
        &lockfile,
        good.replacen("version = \"1.0.0\"", "version = \"9.9.9\"", 1),
    )
    .unwrap();
    let out = install_locked(&w, &w.python, &lockfile, &[]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("lock_of_an_unknown_version", w.redact(&text(&out.stderr)));

    // A pin next to --locked is a usage error (another --arch than the lock's is allowed and
    // said: `lock_archs.rs`).
    std::fs::write(&lockfile, &good).unwrap();
    let out = install_locked(&w, &w.python, &lockfile, &["fixture-pure==1.0.0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn a_bundle_reproduces_the_lock_on_a_node_that_cannot_reach_the_sources() {
    let w = World::new();
    let (repo, commit, tarball, sha) = w.remote_sources();
    let out = w.kiln().args(["install"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lockfile = w.dir.path().join("kiln.lock");
    let bundle = w.dir.path().join("stack.tar");
    assert!(
        w.kiln()
            .args(["lock", "-o"])
            .arg(&lockfile)
            .output()
            .unwrap()
            .status
            .success()
    );
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
    assert!(entries.contains(&format!("sources/{sha}").as_str()), "{v}");
    assert_eq!(entries.iter().filter(|e| e.starts_with("git/")).count(), 1, "{v}");
    assert_eq!(entries.iter().filter(|e| e.starts_with("wheels/")).count(), 3, "{v}");
    assert!(
        v["contents"]["left_out"][0]
            .as_str()
            .unwrap()
            .starts_with("fixture-app: a local directory"),
        "{v}"
    );

    // An ordinary tar: the system `tar` lists the lock first, then the cache entries as they
    // lie in the cache.
    let listed = sh(w.dir.path(), &["tar", "-tf", bundle.to_str().unwrap()]);
    let names: Vec<&str> = listed.lines().map(|l| l.trim_end_matches('/')).collect();
    assert_eq!(names[0], "kiln.lock", "{listed}");
    for entry in &entries {
        assert!(names.contains(entry), "{entry} in {listed}");
    }
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(&format!("sources/{sha}/")) && n.ends_with(".tar.gz")),
        "{listed}"
    );
    assert!(
        names
            .iter()
            .all(|n| *n == "kiln.lock" || entries.iter().any(|e| n.starts_with(e))),
        "{listed}"
    );

    // Another node: a fresh venv, an empty cache, and neither the git origin nor the sdist.
    std::fs::rename(&repo, w.dir.path().join("gone")).unwrap();
    std::fs::remove_file(&tarball).unwrap();
    let node = venv(&w.dir.path().join("node"));
    let out = w
        .kiln_elsewhere(&node, &w.dir.path().join("node-cache"))
        .args(["install", "--json", "--bundle"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    let outcomes = v["outcomes"].as_array().unwrap();
    assert!(outcomes.iter().all(|o| o["from_cache"] == true), "{v}");
    assert!(outcomes.iter().any(|o| o["source"] == format!("git:{commit}")), "{v}");
    assert_eq!(greet(&node), "hello, lock");
}

#[test]
fn cache_clean_keeps_what_a_lock_needs_and_frees_the_rest() {
    let w = World::new();
    let (_repo, _commit, _tarball, sha) = w.remote_sources();
    assert!(w.kiln().args(["install"]).output().unwrap().status.success());
    let lockfile = w.dir.path().join("pure.lock");
    assert!(
        w.kiln()
            .args(["lock", "fixture-pure", "-o"])
            .arg(&lockfile)
            .output()
            .unwrap()
            .status
            .success()
    );

    let parts = |w: &World| -> serde_json::Value { stdout_json(&w.kiln().args(["cache", "--json"]).output().unwrap()) };
    let entries = |v: &serde_json::Value, name: &str| {
        v["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["entries"]
            .as_u64()
            .unwrap()
    };
    let before = parts(&w);
    assert_eq!(entries(&before, "sources"), 1, "{before}");
    assert_eq!(entries(&before, "git"), 1, "{before}");
    assert!(entries(&before, "logs") > 0, "{before}");

    let out = w
        .kiln()
        .args(["cache", "clean", "--json", "--wheels", "--sources", "--keep"])
        .arg(&lockfile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let kept: Vec<&str> = v["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(kept.len(), 2, "fixture-pure's mirror and wheel: {v}");
    let after = parts(&w);
    assert_eq!(
        entries(&after, "sources"),
        0,
        "the sdist no lock needs is gone: {after}"
    );
    assert_eq!(entries(&after, "git"), 1, "{after}");
    assert_eq!(entries(&after, "logs"), 0, "{after}");
    assert!(!w.cache.join("sources").join(&sha).exists());

    // Offline, what the lock needed still installs; the cleaned sdist is refused up front.
    let node = venv(&w.dir.path().join("node"));
    let ok = w
        .kiln_for(&node)
        .args(["install", "--offline", "fixture-pure"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let refused = w
        .kiln_for(&node)
        .args(["install", "--offline", "fixture-cext"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
}
