//! Source kinds other than a local path: a git repository the test creates, an sdist checked
//! against its sha256, and installing through uv when it is on PATH.

use std::process::Command as StdCommand;

use crate::common::{World, git, stdout_json, text};

#[test]
fn git_source_at_a_tag_records_the_commit() {
    let w = World::new();
    let (repo, commit) = w.git_pure();
    // A later commit that must not be what gets built.
    std::fs::write(
        repo.join("kiln_fixture_pure/words.py"),
        "raise ImportError('not the tag')\n",
    )
    .unwrap();
    git(&repo, &["commit", "-qam", "later"]);

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
    let (tarball, sha) = w.sdist("kiln-fixture-pure");

    let wrong = "0".repeat(64);
    w.use_source(
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

    w.use_source(
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

#[test]
fn offline_builds_from_the_caches_and_refuses_early_what_they_lack() {
    let w = World::new();
    // fixture-cext's sdist was never downloaded.
    let (repo, commit, tarball, sha) = w.remote_sources();
    // Offline with an empty cache: blocked at plan time, with the reason; nothing changes.
    let out = w
        .kiln()
        .args(["install", "--offline", "fixture-cext"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains(&format!(
            "offline: the sdist {} is not in the source cache",
            tarball.display()
        )),
        "{all}"
    );
    assert!(w.py("import kiln_fixture_cext").is_err());

    // Online once: the git repository is mirrored and the sdist kept.
    let out = w
        .kiln()
        .args(["install", "fixture-pure", "fixture-cext"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    // The origin is gone: online, the fetch fails; offline, the mirror serves the same commit.
    std::fs::rename(&repo, w.dir.path().join("moved-away")).unwrap();
    let fresh = crate::common::venv(&w.dir.path().join("fresh"));
    let online = w.kiln_for(&fresh).args(["install", "fixture-pure"]).output().unwrap();
    assert_eq!(online.status.code(), Some(1), "{}", text(&online.stderr));
    let out = w
        .kiln_for(&fresh)
        .env("KILN_OFFLINE", "1")
        .args(["install", "--json", "fixture-pure", "fixture-cext"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let sources: Vec<&str> = v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["source"].as_str())
        .collect();
    assert!(sources.contains(&format!("git:{commit}").as_str()), "{v}");
    assert!(sources.contains(&format!("sha256:{sha}").as_str()), "{v}");
}

#[test]
fn a_local_tree_with_symlinks_builds_from_a_copy_that_keeps_them() {
    use std::os::unix::fs::symlink;
    let w = World::new();
    let pkg = w.packages.join("kiln-fixture-pure");
    let module = pkg.join("kiln_fixture_pure");
    // A monorepo's shared module outside the package, linked in; a link inside the package.
    let shared = w.packages.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::rename(module.join("words.py"), shared.join("words.py")).unwrap();
    symlink("../../shared/words.py", module.join("words.py")).unwrap();
    symlink("words.py", module.join("alias.py")).unwrap();

    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        w.py("from kiln_fixture_pure.alias import greet; print(greet('link'))")
            .unwrap(),
        "hello, link"
    );
    // The user's tree is as it was: still links, nothing built into it.
    assert!(
        std::fs::symlink_metadata(module.join("words.py"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!pkg.join("build").exists());
}

#[test]
fn copy_tree_keeps_links_inside_and_copies_what_lies_outside() {
    use std::os::unix::fs::symlink;
    let t = tempfile::tempdir().unwrap();
    let (src, outside, copy) = (t.path().join("src"), t.path().join("outside"), t.path().join("copy"));
    std::fs::create_dir_all(src.join("pkg/sub")).unwrap();
    std::fs::create_dir_all(src.join(".git")).unwrap();
    std::fs::create_dir_all(outside.join("vendored")).unwrap();
    std::fs::write(src.join("pkg/real.py"), "x = 1\n").unwrap();
    std::fs::write(src.join(".git/HEAD"), "ref\n").unwrap();
    std::fs::write(outside.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(outside.join("vendored/lib.h"), "int f();\n").unwrap();
    symlink("../real.py", src.join("pkg/sub/rel.py")).unwrap();
    symlink(src.join("pkg/real.py"), src.join("abs.py")).unwrap();
    symlink("pkg", src.join("pkgdir")).unwrap();
    symlink("../outside/LICENSE", src.join("LICENSE")).unwrap();
    symlink(outside.join("vendored"), src.join("vendored")).unwrap();
    symlink("missing.py", src.join("dangling.py")).unwrap();

    kiln::apply::source::copy_tree(&src, &copy).unwrap();
    let link = |p: &str| std::fs::read_link(copy.join(p)).ok().map(|t| t.display().to_string());
    assert_eq!(link("pkg/sub/rel.py").as_deref(), Some("../real.py"));
    // An absolute link into the tree points into the copy, never back into the user's tree.
    assert_eq!(link("abs.py").as_deref(), Some("pkg/real.py"));
    assert_eq!(link("pkgdir").as_deref(), Some("pkg"));
    assert_eq!(link("dangling.py").as_deref(), Some("missing.py"));
    assert_eq!(link("LICENSE"), None, "copied as a file");
    assert_eq!(std::fs::read_to_string(copy.join("LICENSE")).unwrap(), "MIT\n");
    assert_eq!(link("vendored"), None, "copied as a directory");
    assert_eq!(
        std::fs::read_to_string(copy.join("vendored/lib.h")).unwrap(),
        "int f();\n"
    );
    assert_eq!(
        std::fs::read_to_string(copy.join("pkgdir/sub/rel.py")).unwrap(),
        "x = 1\n"
    );
    assert!(!copy.join(".git").exists());

    // A link that leads back into what is being copied is an error, not an endless copy.
    symlink(t.path(), outside.join("vendored/up")).unwrap();
    let err = kiln::apply::source::copy_tree(&src, &t.path().join("copy2")).unwrap_err();
    assert!(err.to_string().contains("leads back"), "{err}");
}

#[test]
fn an_sdist_keeps_its_inside_links_and_is_refused_for_one_that_leaves() {
    use std::os::unix::fs::symlink;
    let w = World::new();
    let module = w.packages.join("kiln-fixture-pure/kiln_fixture_pure");
    symlink("words.py", module.join("alias.py")).unwrap();
    let (tarball, sha) = w.sdist("kiln-fixture-pure");
    w.use_source(
        "fixture-pure",
        &format!("sdist = \"{}\"\nsha256 = \"{sha}\"", tarball.display()),
    );
    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        w.py("from kiln_fixture_pure.alias import greet; print(greet('sdist'))")
            .unwrap(),
        "hello, sdist"
    );

    symlink("/etc/passwd", module.join("evil.py")).unwrap();
    let (tarball, sha) = w.sdist("kiln-fixture-pure");
    w.use_source(
        "fixture-pure",
        &format!("sdist = \"{}\"\nsha256 = \"{sha}\"", tarball.display()),
    );
    let fresh = crate::common::venv(&w.dir.path().join("fresh"));
    let out = w.kiln_for(&fresh).args(["install", "fixture-pure"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("refused member `kiln-fixture-pure/kiln_fixture_pure/evil.py`"),
        "{err}"
    );
}

/// A kiln that waits for another kiln fetching the same source says so (who, since when) and
/// then goes on with the file the other left: a wait is never silent.
#[test]
fn a_kiln_waiting_for_another_fetching_the_same_source_says_so_then_goes_on() {
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};
    let w = World::new();
    let (tarball, sha) = w.sdist("kiln-fixture-pure");
    w.use_source(
        "fixture-pure",
        &format!("sdist = \"{}\"\nsha256 = \"{sha}\"", tarball.display()),
    );
    // The other kiln: this test, holding the source's download lock.
    let lock = kiln::store::locks::source_lock(&w.cache, &sha);
    let held = kiln::store::locks::take(&lock, "the source download", false, |_| {}).unwrap();
    let mut child = w
        .kiln_std()
        .args(["install", "fixture-pure"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    let said = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("waiting for another kiln fetching the same source: pid ") => break line,
            Ok(line) => seen.push(line),
            Err(_) => {
                let _ = child.kill();
                panic!("no word of the wait: {seen:?}");
            }
        }
    };
    assert!(said.contains("fixture-pure: fetch: "), "{said}");
    drop(held);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    seen.extend(rx.try_iter());
    assert!(status.success(), "{seen:?}");
    w.py("import kiln_fixture_pure").unwrap();
}
