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

        let (bundle, out) = w.bundle(&lock, "out.tar");
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

/// The one wheel in the cache (`cache/wheels/<xx>/<key>/*.whl`).
fn cached_wheel(cache: &std::path::Path) -> Option<PathBuf> {
    let mut found = Vec::new();
    for shard in std::fs::read_dir(cache.join("wheels")).ok()?.flatten() {
        for entry in std::fs::read_dir(shard.path()).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(entry.path()).into_iter().flatten().flatten() {
                if f.path().extension().is_some_and(|x| x == "whl") {
                    found.push(f.path());
                }
            }
        }
    }
    assert!(found.len() <= 1, "{found:?}");
    found.pop()
}

/// Rewrites a wheel so that `greet` says "tampered": still a wheel pip installs.
fn tamper(wheel: &std::path::Path) {
    crate::common::sh(
        wheel.parent().unwrap(),
        &[
            "python3",
            "-c",
            "import sys, zipfile\n\
             src = sys.argv[1]\n\
             with zipfile.ZipFile(src) as a:\n\
             \x20   items = [(i, a.read(i.filename)) for i in a.infolist()]\n\
             with zipfile.ZipFile(src, 'w') as b:\n\
             \x20   for i, data in items:\n\
             \x20       if i.filename.endswith('words.py'):\n\
             \x20           data = b'def greet(name):\\n    return \"tampered, \" + name\\n'\n\
             \x20       b.writestr(i, data)",
            wheel.to_str().unwrap(),
        ],
    );
}

fn sha256(path: &std::path::Path) -> String {
    crate::common::sh(path.parent().unwrap(), &["sha256sum", path.to_str().unwrap()])
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn greeting(python: &std::path::Path) -> Result<String, String> {
    let out = std::process::Command::new(python)
        .args(["-c", "from kiln_fixture_pure import greet; print(greet('x'))"])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(text(&out.stdout).trim().to_string())
    } else {
        Err(text(&out.stderr))
    }
}

fn quarantined(cache: &std::path::Path) -> Vec<PathBuf> {
    std::fs::read_dir(cache.join("quarantine"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect()
}

#[test]
fn a_cached_wheel_that_is_not_the_one_its_hash_names_is_refused_and_moved_aside() {
    let w = World::new();
    w.git_pure();
    w.install_ok("fixture-pure");
    let lockfile = w.lock("fixture-pure");
    let wheel = cached_wheel(&w.cache).expect("a cached wheel");

    // A consistent entry (its record rewritten too) whose wheel is not the lock's: refused by
    // the lock before it is installed, and moved aside.
    tamper(&wheel);
    std::fs::write(wheel.with_file_name("wheel.sha256"), sha256(&wheel)).unwrap();
    let node = crate::common::venv(&w.dir.path().join("node"));
    let out = w
        .kiln_for(&node)
        .args(["install", "--locked", "--lock"])
        .arg(&lockfile)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}{err}", text(&out.stdout));
    assert!(err.contains("is not the one the lock names"), "{err}");
    assert!(greeting(&node).is_err(), "the tampered wheel was installed");
    assert_eq!(quarantined(&w.cache).len(), 1, "{err}");
    assert!(err.contains(&quarantined(&w.cache)[0].display().to_string()), "{err}");
    assert_eq!(cached_wheel(&w.cache), None);

    // The next run builds it from the locked source; a rebuild is compared field by field.
    let out = w
        .kiln_for(&node)
        .args(["install", "--json", "--locked", "--lock"])
        .arg(&lockfile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = crate::common::stdout_json(&out);
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    assert_eq!(greeting(&node).unwrap(), "hello, x");

    // A wheel changed under its entry's record: refused at use, moved aside.
    let wheel = cached_wheel(&w.cache).expect("the rebuilt wheel is cached");
    tamper(&wheel);
    let other = crate::common::venv(&w.dir.path().join("other"));
    let out = w.kiln_for(&other).args(["install", "fixture-pure"]).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}{err}", text(&out.stdout));
    assert!(err.contains("is not the one its cache entry names"), "{err}");
    assert!(greeting(&other).is_err(), "the tampered wheel was installed");
    assert_eq!(quarantined(&w.cache).len(), 2, "{err}");
}

/// Rewrites the bundle `from` into `to`: `wheel` tampers its wheel, `extra` adds a member the
/// lock does not name.
fn rewrite_bundle(from: &std::path::Path, to: &std::path::Path, how: &str) {
    crate::common::sh(
        from.parent().unwrap(),
        &[
            "python3",
            "-c",
            "import io, sys, tarfile, zipfile\n\
             src, dst, how = sys.argv[1:]\n\
             def tampered(data):\n\
             \x20   a = zipfile.ZipFile(io.BytesIO(data))\n\
             \x20   out = io.BytesIO()\n\
             \x20   with zipfile.ZipFile(out, 'w') as b:\n\
             \x20       for i in a.infolist():\n\
             \x20           d = a.read(i.filename)\n\
             \x20           if i.filename.endswith('words.py'):\n\
             \x20               d = b'def greet(name):\\n    return \"tampered, \" + name\\n'\n\
             \x20           b.writestr(i, d)\n\
             \x20   return out.getvalue()\n\
             with tarfile.open(src) as a, tarfile.open(dst, 'w') as b:\n\
             \x20   for m in a.getmembers():\n\
             \x20       data = a.extractfile(m).read() if m.isfile() else None\n\
             \x20       if how == 'wheel' and m.name.endswith('.whl'):\n\
             \x20           data = tampered(data)\n\
             \x20           m.size = len(data)\n\
             \x20       b.addfile(m, io.BytesIO(data) if data is not None else None)\n\
             \x20   if how == 'extra':\n\
             \x20       m = tarfile.TarInfo('sources/' + 'a' * 64 + '/evil.txt')\n\
             \x20       m.size = 4\n\
             \x20       b.addfile(m, io.BytesIO(b'evil'))",
            from.to_str().unwrap(),
            to.to_str().unwrap(),
            how,
        ],
    );
}

#[test]
fn a_bundle_holds_only_what_its_lock_names_and_its_wheels_are_the_locked_ones() {
    let w = World::new();
    w.git_pure();
    w.install_ok("fixture-pure");
    let lockfile = w.lock("fixture-pure");
    let (bundle, out) = w.bundle(&lockfile, "stack.tar");
    assert!(out.status.success(), "{}", text(&out.stderr));

    for (how, says) in [
        ("wheel", "which its kiln.lock does not name for any component"),
        (
            "extra",
            "which its kiln.lock does not name (kiln bundle never writes it)",
        ),
    ] {
        let hostile = w.dir.path().join(format!("{how}.tar"));
        rewrite_bundle(&bundle, &hostile, how);
        let node = crate::common::venv(&w.dir.path().join(format!("node-{how}")));
        let cache = w.dir.path().join(format!("cache-{how}"));
        let out = w
            .kiln_elsewhere(&node, &cache)
            .args(["install", "--bundle"])
            .arg(&hostile)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{how}: {}{err}", text(&out.stdout));
        assert!(err.contains(says), "{how}: {err}");
        assert!(greeting(&node).is_err(), "{how}: installed");
        assert_eq!(cached_wheel(&cache), None, "{how}");
        assert!(!cache.join("sources").join("a".repeat(64)).exists(), "{how}");
        if how == "wheel" {
            assert_eq!(quarantined(&cache).len(), 1, "{err}");
        }
    }

    // A cached wheel replaced by a fifo: `kiln bundle` does not wait on it forever.
    let wheel = cached_wheel(&w.cache).unwrap();
    std::fs::remove_file(&wheel).unwrap();
    crate::common::sh(w.dir.path(), &["mkfifo", wheel.to_str().unwrap()]);
    let out = w
        .kiln()
        .args(["bundle", "--lock"])
        .arg(&lockfile)
        .arg("-o")
        .arg(w.dir.path().join("again.tar"))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some(),
        "kiln bundle hung on a fifo: {}",
        text(&out.stderr)
    );
}

#[test]
fn readers_refuse_a_fifo_instead_of_waiting_on_it() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("libkernels.so");
    crate::common::sh(t.path(), &["mkfifo", fifo.to_str().unwrap()]);
    let out = crate::common::kiln_bare()
        .args(["arch", "--driver-cuda", "13.0"])
        .arg(&fifo)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.code().is_some(), "kiln arch hung on a fifo");
    assert!(err.contains("not a regular file"), "{}{err}", text(&out.stdout));
    for args in [&["install", "--bundle"][..], &["install", "--locked", "--lock"][..]] {
        let out = crate::common::kiln_bare()
            .args(["--cache-dir"])
            .arg(t.path().join("cache"))
            .args(args)
            .arg(&fifo)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?} hung or passed: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
}

#[test]
fn a_build_that_prints_its_environment_leaks_no_credential_into_logs_or_events() {
    let w = World::new();
    let p = w.recipes.join("fixture-pure.toml");
    let mut recipe = std::fs::read_to_string(&p).unwrap();
    recipe.push_str(
        "\n[build]\nprepare = [[\"{python}\", \"-c\", \"import os; print(dict(os.environ)); print('token', os.environ['HF_TOKEN'])\"]]\nenv = { UPLOAD_PASSWORD = \"pw-in-the-recipe-42\" }\n",
    );
    std::fs::write(&p, recipe).unwrap();
    let out = w
        .kiln()
        .args(["install", "--json", "fixture-pure"])
        .env("HF_TOKEN", "hf_sekrit_value_1234")
        .env("MY_SERVICE_API_KEY", "key-abcdef-98765")
        .output()
        .unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    let logs = PathBuf::from(crate::common::stdout_json(&out)["logs"].as_str().unwrap().to_string());
    let mut seen = String::new();
    for e in std::fs::read_dir(&logs).unwrap().flatten() {
        seen.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
    }
    assert!(
        seen.contains("'HF_TOKEN': '****'"),
        "the build printed its environment: {seen}"
    );
    assert!(seen.contains("token ****"), "{seen}");
    for secret in ["hf_sekrit_value_1234", "key-abcdef-98765", "pw-in-the-recipe-42"] {
        assert!(!seen.contains(secret), "{secret} in the logs");
        assert!(!all.contains(secret), "{secret} in the report");
    }
}

#[test]
fn a_wheel_named_otherwise_than_the_recipes_dist_is_really_removed_again() {
    let w = World::new();
    w.edit(
        "recipes/fixture-pure.toml",
        "dist = \"kiln-fixture-pure\"",
        "dist = \"kiln-fixture-other\"",
    );
    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("was removed again"), "{all}");
    assert!(
        !installed(&w, "kiln_fixture_pure"),
        "it says removed, but it stays: {all}"
    );
}
