//! One environment, one transaction (issue 23 F2, F4, F5, F13; issue 19's rollback of
//! dependencies), with the real kiln, real venvs and real pip and uv: two kilns with different
//! caches exclude each other on one venv; a multi-step install that fails in a later step is
//! rolled back whole (or, with `--keep-done`, keeps its proven steps and says so); a rollback
//! removes the dependencies a step added or changed and what a killed pip left half-written or
//! stashed; a journal kiln cannot read stops it, naming the file.

use std::path::Path;
use std::time::Duration;

use crate::common::{World, text};
use crate::crash::{kill, pending_2_0_0, pid_in, spawn, version, wait_for};

/// The entries of site-packages whose name starts with `~` (pip's stash of what it uninstalls).
fn stashes(site: &Path) -> Vec<String> {
    std::fs::read_dir(site)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('~'))
        .collect()
}

fn pip_check(w: &World) -> Result<String, String> {
    w.py("import subprocess, sys; r = subprocess.run([sys.executable, '-m', 'pip', 'check'], capture_output=True, text=True); print(r.stdout); sys.exit(r.returncode)")
}

/// F2: the environment's lock is the environment's, not the cache's.
#[test]
fn two_kilns_with_different_caches_on_one_environment_exclude_each_other() {
    let (w, hooks) = pending_2_0_0();
    let dir = hooks.to_str().unwrap();
    let mut first = spawn(
        &w,
        &w.python,
        &[("HOOK_DIR", dir), ("HOOK_BLOCK", "1")],
        &["install", "fixture-pure"],
    );
    wait_for(&hooks.join("building"), &mut first);
    let other_cache = w.dir.path().join("other-cache");
    let out = w
        .kiln_elsewhere(&w.python, &other_cache)
        .args(["--no-wait", "install", "fixture-pure"])
        .env("HOOK_DIR", dir)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is being changed by another kiln") && err.contains(&format!("pid {} (", first.id())),
        "{err}"
    );
    std::fs::write(hooks.join("go"), "").unwrap();
    assert!(first.wait().unwrap().success());
    assert_eq!(version(&w), "2.0.0");
}

/// The two pending steps of `kill_points` (fixture-pure 2.0.0, then fixture-cext 1.1.0, which
/// depends on it); fixture-cext's rebuild fails to compile.
fn two_steps_the_second_failing() -> World {
    let w = crate::kill_points::two_steps_pending();
    // fixture-cext 1.1.0 does not compile.
    w.edit(
        "packages/kiln-fixture-cext/kiln_fixture_cext/_speedups.c",
        "return PyLong_FromLong(a + b);",
        "return PyLong_FromLong(a + b) this is not C;",
    );
    w
}

/// F13: when the second step of an install fails, the first is rolled back too and kiln says
/// so; `--keep-done` keeps it, saying that.
#[test]
fn a_later_step_that_fails_rolls_back_the_earlier_ones_unless_keep_done() {
    let w = two_steps_the_second_failing();
    let out = w
        .kiln()
        .args(["install", "fixture-pure", "fixture-cext"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: fixture-cext failed during wheel"), "{err}");
    assert_eq!(version(&w), "1.0.0", "the first step was rolled back: {err}");
    w.py("import kiln_fixture_cext._speedups").unwrap();
    assert!(!err.contains("the environment is unchanged"), "{err}");
    assert!(
        err.contains("the steps this run proved before it were rolled back")
            && err.contains("fixture-pure (installed and verified earlier in this run) rolled back too")
            && err.contains("kiln-fixture-pure 2.0.0 -> 1.0.0"),
        "{err}"
    );
    assert!(std::fs::read_dir(w.cache.join("journal")).unwrap().next().is_none());
    assert!(
        !w.python
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join(".kiln-snapshot")
            .exists()
    );

    let out = w
        .kiln()
        .args(["install", "--keep-done", "--json", "fixture-pure", "fixture-cext"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = crate::common::stdout_json(&out);
    assert_eq!(version(&w), "2.0.0", "--keep-done keeps the proven step");
    let undo = v["undo"]["kept"].as_array().unwrap();
    assert_eq!(undo, &[serde_json::json!("fixture-pure")], "{v}");
    assert!(
        v["failure"]["restored"]
            .as_str()
            .unwrap()
            .contains("the steps this run proved before it stay (--keep-done)"),
        "{v}"
    );
}

/// Issue 19 and F4: a failed step's dependencies (one added, one downgraded by `[install] deps
/// = true`) are put back with it, so `pip check` passes and no new file stays.
#[test]
fn a_rollback_removes_the_dependencies_the_step_added_or_changed() {
    let (w, _hooks) = pending_2_0_0();
    let site = w.site_packages();
    w.edit(
        "packages/kiln-fixture-pure/pyproject.toml",
        "description = \"kiln test fixture: a pure Python package\"",
        "description = \"kiln test fixture: a pure Python package\"\ndependencies = [\"six\", \"wheel==0.44.0\"]",
    );
    w.edit(
        "recipes/fixture-pure.toml",
        "[verify]",
        "[install]\ndeps = true\n\n[verify]",
    );
    // 2.0.0 brings a module of its own and fails its import.
    w.write("packages/kiln-fixture-pure/kiln_fixture_pure/only_in_2.py", "X = 1\n");
    w.write(
        "packages/kiln-fixture-pure/kiln_fixture_pure/words.py",
        "raise ImportError('2.0.0 is broken on purpose')\n",
    );
    let hooks = _hooks.to_str().unwrap();
    let out = w
        .kiln()
        .args(["install", "fixture-pure"])
        .env("HOOK_DIR", hooks)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(version(&w), "1.0.0", "{err}");
    assert!(
        w.py("import six").is_err(),
        "six, added by the failed step, stays: {err}"
    );
    assert_eq!(
        w.py("import wheel; print(wheel.__version__)").unwrap(),
        "0.45.1",
        "{err}"
    );
    assert!(!site.join("kiln_fixture_pure/only_in_2.py").exists());
    assert!(stashes(&site).is_empty(), "{:?}", stashes(&site));
    pip_check(&w).unwrap();
    assert!(
        err.contains("six ") && err.contains(" removed") && err.contains("wheel 0.44.0 -> 0.45.1"),
        "{err}"
    );
}

/// F4: kiln killed while real pip is half-way through writing the new version (its `~` stash
/// of the old one in site-packages): the next kiln leaves none of the new files and no stash.
#[test]
fn a_kill_in_the_middle_of_a_pip_install_leaves_no_new_file_and_no_stash() {
    let (w, hooks) = pending_2_0_0();
    let site = w.site_packages();
    for i in 0..20 {
        w.write(
            &format!("packages/kiln-fixture-pure/kiln_fixture_pure/new_{i}.py"),
            "X = 2\n",
        );
    }
    // A stand-in for uv: real pip, paused (then killed) after it wrote its third file.
    let bin = w.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let uv = bin.join("uv");
    std::fs::write(
        &uv,
        "#!/usr/bin/env python3\n\
         import os, subprocess, sys\n\
         a = sys.argv[1:]\n\
         py = a[a.index('--python') + 1]\n\
         rest = [x for x in a[2:] if x not in ('--python', py, '--reinstall')]\n\
         patch = '''\n\
import os, sys, time\n\
import pip._internal.operations.install.wheel as w\n\
orig = w.ZipBackedFile.save\n\
n = [0]\n\
def save(self):\n\
\x20   orig(self)\n\
\x20   n[0] += 1\n\
\x20   if n[0] == 3 and os.environ.get('HOOK_INSTALL_MARK'):\n\
\x20       open(os.environ['HOOK_INSTALL_MARK'], 'w').write(str(os.getpid()))\n\
\x20       time.sleep(600)\n\
w.ZipBackedFile.save = save\n\
from pip._internal.cli.main import main\n\
sys.exit(main(sys.argv[1:]))\n\
'''\n\
         if a[1] == 'install':\n\
         \x20   sys.exit(subprocess.run([py, '-c', patch, 'install', '-q', '--force-reinstall', '--no-input'] + rest).returncode)\n\
         sys.exit(subprocess.run([py, '-m', 'pip', 'uninstall', '-y'] + rest).returncode)\n",
    )
    .unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&uv).status().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mark = hooks.join("installing");
    let env = [
        ("HOOK_DIR", hooks.to_str().unwrap()),
        ("PATH", path.as_str()),
        ("HOOK_INSTALL_MARK", mark.to_str().unwrap()),
    ];
    let mut kiln = spawn(&w, &w.python, &env, &["install", "fixture-pure"]);
    wait_for(&mark, &mut kiln);
    let pip = pid_in(&mark);
    assert!(!stashes(&site).is_empty(), "pip stashed the old version");
    kill(&mut kiln, "-9");
    let _ = kiln.wait();
    let _ = std::process::Command::new("kill")
        .args(["-9", &pip.to_string()])
        .status();
    std::thread::sleep(Duration::from_millis(200));

    let out = w.kiln().args(["doctor", "fixture-pure"]).output().unwrap();
    let err = text(&out.stderr);
    assert!(err.contains("rolled back"), "{err}");
    assert_eq!(version(&w), "1.0.0", "{err}");
    let left: Vec<_> = (0..20)
        .filter(|i| site.join(format!("kiln_fixture_pure/new_{i}.py")).exists())
        .collect();
    assert!(left.is_empty(), "files of 2.0.0 stayed: {left:?}");
    assert!(stashes(&site).is_empty(), "{:?}", stashes(&site));
    pip_check(&w).unwrap();
}

/// F5: a journal kiln cannot read stops every command, naming the file; a fifo never hangs it.
#[test]
fn a_journal_that_cannot_be_read_stops_kiln_naming_it() {
    let w = World::new();
    let journal = w.cache.join("journal");
    std::fs::create_dir_all(&journal).unwrap();
    // The name a real entry of this environment has.
    let key = kiln::store::locks::env_key(&w.python);
    let file = journal.join(format!("{key}.json"));
    let cases: [(&str, &[u8]); 3] = [
        ("truncated", b"{\"python\": \"/v/bin/py"),
        ("garbage", b"\x00\x01 not json"),
        ("shape", b"[1, 2, 3]"),
    ];
    for (what, bytes) in cases {
        std::fs::write(&file, bytes).unwrap();
        let out = w.kiln().args(["doctor", "fixture-pure"]).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains(&format!("the install journal {} cannot be read", file.display()))
                && err.contains(&format!("rm {}", file.display())),
            "{what}: {err}"
        );
    }
    // Another environment's entry under this environment's name.
    let other = serde_json::json!({
        "python": "/elsewhere/bin/python", "component": "fixture-pure", "dist": "kiln-fixture-pure",
        "state": "installing", "backup": null, "backup_dir": "/nowhere", "uninstall": [], "pid": 1, "since": 0
    });
    std::fs::write(&file, other.to_string()).unwrap();
    let out = w.kiln().args(["doctor", "fixture-pure"]).output().unwrap();
    let err = text(&out.stderr);
    assert!(err.contains("its name is another environment's"), "{err}");
    // A fifo: an error at once, no hang.
    std::fs::remove_file(&file).unwrap();
    let st = std::process::Command::new("mkfifo").arg(&file).status().unwrap();
    assert!(st.success());
    let start = std::time::Instant::now();
    let out = w
        .kiln()
        .args(["doctor", "fixture-pure"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(err.contains("it is a fifo, not a regular file"), "{err}");
}

/// F14, F16: one `kiln.json` of an unexpected shape makes that component unproven, named,
/// while doctor and lock still work; a fifo in the probe cache does not hang doctor.
#[test]
fn a_kiln_json_of_another_shape_makes_one_component_stale_and_names_the_file() {
    let w = World::new();
    w.install_ok("fixture-pure");
    w.install_ok("fixture-cext");
    let site = w.site_packages();
    let info = site.join("kiln_fixture_pure-1.0.0.dist-info");
    std::fs::write(info.join("kiln.json"), "{\"component\": [\"not\", \"a\", \"record\"]}").unwrap();
    let out = w.kiln().args(["doctor", "--json"]).output().unwrap();
    let v = crate::common::stdout_json(&out);
    let pure = crate::common::component(&v, "fixture-pure");
    assert_eq!(pure["status"], "stale", "{pure}");
    let evidence = pure["evidence"].as_str().unwrap();
    assert!(
        evidence.contains(&format!("{} cannot be read", info.join("kiln.json").display())),
        "{evidence}"
    );
    assert_eq!(crate::common::component(&v, "fixture-cext")["status"], "ok", "{v}");
    let out = w
        .kiln()
        .args(["lock", "fixture-cext", "-o"])
        .arg(w.dir.path().join("k.lock"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A fifo where a probe cache entry goes: doctor does not hang on it.
    let probe = w.cache.join("probe");
    for e in walk(&probe) {
        if e.extension().is_some_and(|x| x == "json") {
            std::fs::remove_file(&e).unwrap();
            assert!(std::process::Command::new("mkfifo").arg(&e).status().unwrap().success());
        }
    }
    let out = w
        .kiln()
        .args(["doctor", "fixture-cext"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
