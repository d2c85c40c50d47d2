//! Crash safety, time limits and one writer per environment, with real kills of the real kiln:
//! kiln is killed with `kill -9` (or SIGINT) at each point of a step (build, install, verify,
//! record); afterwards the environment imports what it imported before, nothing kiln started is
//! left running, and the next run puts things back, says so, and completes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{World, text};

/// fixture-pure 1.0.0 installed by kiln; the recipe and package then say 2.0.0, built by
/// `hook.sh`, which counts builds in `<dir>/builds` and, with `HOOK_BLOCK` set, writes
/// `<dir>/building`, starts a background `sleep` (its pid in `<dir>/sleeper`) and waits for
/// `<dir>/go`; with `HOOK_STALL` it waits on a `sleep` (no output, no CPU); with `HOOK_BUSY` it
/// spins (CPU, no output).
pub(crate) fn pending_2_0_0() -> (World, PathBuf) {
    let w = World::new();
    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(version(&w), "1.0.0");
    let hooks = w.dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    w.write(
        "packages/kiln-fixture-pure/hook.sh",
        "#!/bin/sh\n\
         echo built >> \"$HOOK_DIR/builds\"\n\
         if [ -n \"$HOOK_BLOCK\" ]; then\n\
           sleep 600 & echo $! > \"$HOOK_DIR/sleeper\"\n\
           touch \"$HOOK_DIR/building\"\n\
           while [ ! -e \"$HOOK_DIR/go\" ]; do sleep 0.1; done\n\
           kill $!\n\
         fi\n\
         if [ -n \"$HOOK_STALL\" ]; then sleep 600 & echo $! > \"$HOOK_DIR/sleeper\"; wait; fi\n\
         if [ -n \"$HOOK_BUSY\" ]; then while :; do :; done; fi\n\
         exec \"$1\" -m pip wheel --no-deps --no-build-isolation --no-input -w \"$2\" \"$3\"\n",
    );
    w.edit("packages/kiln-fixture-pure/pyproject.toml", "1.0.0", "2.0.0");
    w.edit(
        "recipes/fixture-pure.toml",
        "version = \"1.0.0\"",
        "version = \"2.0.0\"",
    );
    w.edit(
        "recipes/fixture-pure.toml",
        "[verify]",
        "[build]\nwheel = [\"sh\", \"{src}/hook.sh\", \"{python}\", \"{wheel_dir}\", \"{src}\"]\n\n[verify]",
    );
    // 2.0.0 blocks on import while `HOOK_IMPORT_MARK` names a file: the verification hangs.
    w.edit(
        "packages/kiln-fixture-pure/kiln_fixture_pure/__init__.py",
        "from kiln_fixture_pure.words",
        "import os, time\n\
         if os.environ.get('HOOK_IMPORT_MARK'):\n\
         \x20   open(os.environ['HOOK_IMPORT_MARK'], 'w').write(str(os.getpid()))\n\
         \x20   time.sleep(600)\n\
         from kiln_fixture_pure.words",
    );
    (w, hooks)
}

/// The installed version of kiln-fixture-pure, as the environment imports it.
pub(crate) fn version(w: &World) -> String {
    w.py("import kiln_fixture_pure, importlib.metadata as m; print(m.version('kiln-fixture-pure'))")
        .unwrap()
}

/// kiln as a child process (so that it can be killed), on the world's recipes, venv and cache.
pub(crate) fn spawn(w: &World, python: &Path, env: &[(&str, &str)], args: &[&str]) -> Child {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("kiln"));
    for k in [
        "VIRTUAL_ENV",
        "KILN_GPU_ARCH",
        "KILN_CACHE_DIR",
        "KILN_OFFLINE",
        "CUDA_HOME",
    ] {
        c.env_remove(k);
    }
    c.arg("--recipes")
        .arg(&w.recipes)
        .arg("--python")
        .arg(python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .arg("--no-progress")
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Waits until `file` exists (kiln reached the point), at most two minutes.
pub(crate) fn wait_for(file: &Path, child: &mut Child) {
    let start = Instant::now();
    while !file.exists() {
        if let Ok(Some(st)) = child.try_wait() {
            let out = child.stderr.take().map(std::io::read_to_string).unwrap().unwrap();
            panic!("kiln ended ({st}) before {}: {out}", file.display());
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{} never came",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: u32) -> bool {
    // A zombie has been killed; only its parent has not read its status yet.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
}

pub(crate) fn pid_in(file: &Path) -> u32 {
    std::fs::read_to_string(file).unwrap().trim().parse().unwrap()
}

/// True once `pid` is gone, waiting at most 5 s.
pub(crate) fn gone(pid: u32) -> bool {
    let start = Instant::now();
    while alive(pid) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive(pid)
}

pub(crate) fn kill(child: &mut Child, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// `kiln ARGS` with the fixture's hooks in `dir` and `env` set, to its end.
fn with_hooks(w: &World, dir: &str, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut c = w.kiln();
    c.args(args).env("HOOK_DIR", dir);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// With no hook in the way, the pending 2.0.0 installs.
fn installs_2_0_0(w: &World, dir: &str) {
    let out = with_hooks(w, dir, &[], &["install", "fixture-pure"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(version(w), "2.0.0");
}

/// After a kill at some point: any kiln command puts the environment back (saying so), it
/// imports 1.0.0 again, and an install then completes with 2.0.0.
fn next_run_rolls_back_and_completes(w: &World, what: &str) {
    let out = w.kiln().args(["doctor", "fixture-pure"]).output().unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains("was stopped while installing fixture-pure") && err.contains(what),
        "{err}"
    );
    assert_eq!(version(w), "1.0.0", "{err}");
    assert!(std::fs::read_dir(w.cache.join("journal")).unwrap().next().is_none());
    let out = w.kiln().args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("was stopped"), "reported once");
    assert_eq!(version(w), "2.0.0");
}

#[test]
fn a_kill_during_the_build_leaves_nothing_running_and_the_environment_as_it_was() {
    let (w, hooks) = pending_2_0_0();
    let dir = hooks.to_str().unwrap();
    let mut kiln = spawn(
        &w,
        &w.python,
        &[("HOOK_DIR", dir), ("HOOK_BLOCK", "1")],
        &["install", "fixture-pure"],
    );
    wait_for(&hooks.join("building"), &mut kiln);
    kill(&mut kiln, "-9");
    let _ = kiln.wait();
    assert_eq!(version(&w), "1.0.0");
    // The build's leader died with kiln; what it started dies at the next kiln at the latest.
    let sleeper = pid_in(&hooks.join("sleeper"));
    let out = w.kiln().args(["doctor", "fixture-pure"]).output().unwrap();
    assert!(
        gone(sleeper),
        "the build's `sleep` outlived kiln: {}",
        text(&out.stderr)
    );
    assert_eq!(version(&w), "1.0.0");
    installs_2_0_0(&w, dir);
}

#[test]
fn a_kill_during_the_install_is_rolled_back_by_the_next_run() {
    let (w, hooks) = pending_2_0_0();
    // A stand-in for uv on PATH: installs with pip, then (with HOOK_INSTALL_MARK) blocks, so kiln
    // is killed with the new version in site-packages and nothing verified.
    let bin = w.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let uv = bin.join("uv");
    std::fs::write(
        &uv,
        "#!/usr/bin/env python3\n\
         import os, subprocess, sys, time\n\
         a = sys.argv[1:]\n\
         py = a[a.index('--python') + 1]\n\
         rest = [x for x in a[2:] if x not in ('--python', py, '--reinstall')]\n\
         if a[1] == 'install':\n\
         \x20   subprocess.run([py, '-m', 'pip', 'install', '-q', '--force-reinstall', '--no-input'] + rest, check=True)\n\
         \x20   mark = os.environ.get('HOOK_INSTALL_MARK')\n\
         \x20   if mark:\n\
         \x20       open(mark, 'w').write(str(os.getpid()))\n\
         \x20       time.sleep(600)\n\
         else:\n\
         \x20   subprocess.run([py, '-m', 'pip', 'uninstall', '-y'] + rest, check=True)\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&uv).status().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mark = hooks.join("installed");
    let env = [
        ("HOOK_DIR", hooks.to_str().unwrap()),
        ("PATH", path.as_str()),
        ("HOOK_INSTALL_MARK", mark.to_str().unwrap()),
    ];
    let mut kiln = spawn(&w, &w.python, &env, &["install", "fixture-pure"]);
    wait_for(&mark, &mut kiln);
    assert_eq!(version(&w), "2.0.0", "the install replaced 1.0.0");
    kill(&mut kiln, "-9");
    let _ = kiln.wait();
    assert!(gone(pid_in(&mark)), "the installer outlived kiln");
    next_run_rolls_back_and_completes(&w, "the previous kiln-fixture-pure restored");
}

#[test]
fn a_kill_during_the_verification_is_rolled_back_by_the_next_run() {
    let (w, hooks) = pending_2_0_0();
    let mark = hooks.join("importing");
    let env = [
        ("HOOK_DIR", hooks.to_str().unwrap()),
        ("HOOK_IMPORT_MARK", mark.to_str().unwrap()),
    ];
    let mut kiln = spawn(&w, &w.python, &env, &["install", "fixture-pure"]);
    wait_for(&mark, &mut kiln);
    kill(&mut kiln, "-9");
    let _ = kiln.wait();
    assert!(gone(pid_in(&mark)), "the verification probe outlived kiln");
    next_run_rolls_back_and_completes(&w, "rolled back");
}

#[test]
fn a_kill_while_recording_is_rolled_back_by_the_next_run() {
    let (w, hooks) = pending_2_0_0();
    let mark = hooks.join("recording");
    let pause = format!("record:{}", mark.display());
    let env = [
        ("HOOK_DIR", hooks.to_str().unwrap()),
        ("KILN_TEST_PAUSE_AT", pause.as_str()),
    ];
    let mut kiln = spawn(&w, &w.python, &env, &["install", "fixture-pure"]);
    wait_for(&mark, &mut kiln);
    kill(&mut kiln, "-9");
    let _ = kiln.wait();
    next_run_rolls_back_and_completes(&w, "rolled back");
}

#[test]
fn sigint_kills_the_verification_puts_the_environment_back_and_exits_130() {
    let (w, hooks) = pending_2_0_0();
    let mark = hooks.join("importing");
    let env = [
        ("HOOK_DIR", hooks.to_str().unwrap()),
        ("HOOK_IMPORT_MARK", mark.to_str().unwrap()),
    ];
    let mut kiln = spawn(&w, &w.python, &env, &["install", "fixture-pure"]);
    wait_for(&mark, &mut kiln);
    let probe = pid_in(&mark);
    kill(&mut kiln, "-INT");
    let out = kiln.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("the previous kiln-fixture-pure was restored"), "{err}");
    assert!(gone(probe));
    assert_eq!(version(&w), "1.0.0");
    assert!(std::fs::read_dir(w.cache.join("journal")).unwrap().next().is_none());
}

#[test]
fn a_second_kiln_on_one_environment_waits_and_says_for_whom() {
    let (w, hooks) = pending_2_0_0();
    let dir = hooks.to_str().unwrap();
    let mut first = spawn(
        &w,
        &w.python,
        &[("HOOK_DIR", dir), ("HOOK_BLOCK", "1")],
        &["install", "fixture-pure"],
    );
    wait_for(&hooks.join("building"), &mut first);
    let pid = first.id();
    // --no-wait: fails at once, naming the other kiln.
    let out = w
        .kiln()
        .args(["--no-wait", "install", "fixture-pure"])
        .env("HOOK_DIR", dir)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("pid {pid} (")) && err.contains("install fixture-pure"),
        "{err}"
    );
    assert!(err.contains("--no-wait"), "{err}");
    // Without it: waits (saying for whom), then finds the work done.
    let mut second = spawn(&w, &w.python, &[("HOOK_DIR", dir)], &["install", "fixture-pure"]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(second.try_wait().unwrap().is_none(), "the second kiln did not wait");
    std::fs::write(hooks.join("go"), "").unwrap();
    assert!(first.wait().unwrap().success());
    let out = second.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "waiting for another kiln changing the environment of {}",
            w.python.display()
        )),
        "{err}"
    );
    assert!(err.contains(&format!("pid {pid} (")), "{err}");
    let builds = std::fs::read_to_string(hooks.join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1, "built twice");
    assert_eq!(version(&w), "2.0.0");
}

#[test]
fn two_kilns_sharing_a_cache_build_one_wheel_once() {
    let (w, hooks) = pending_2_0_0();
    let other = crate::common::venv(&w.dir.path().join("venv2"));
    let dir = hooks.to_str().unwrap();
    let mut first = spawn(
        &w,
        &w.python,
        &[("HOOK_DIR", dir), ("HOOK_BLOCK", "1")],
        &["install", "--json", "fixture-pure"],
    );
    wait_for(&hooks.join("building"), &mut first);
    // Another environment, the same cache: the same wheel-cache entry.
    let second = spawn(
        &w,
        &other,
        &[("HOOK_DIR", dir), ("HOOK_BLOCK", "1")],
        &["install", "--json", "fixture-pure"],
    );
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(hooks.join("go"), "").unwrap();
    assert!(first.wait().unwrap().success());
    let out = second.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("waiting for another kiln building the same wheel: pid"),
        "{err}"
    );
    let builds = std::fs::read_to_string(hooks.join("builds")).unwrap();
    assert_eq!(builds.lines().count(), 1, "the same wheel was built twice at once");
    let v = crate::common::stdout_json(&out);
    let o = &v["outcomes"].as_array().unwrap()[0];
    assert_eq!(
        (o["name"].as_str(), o["from_cache"].as_bool()),
        (Some("fixture-pure"), Some(true)),
        "{v}"
    );
}

#[test]
fn a_build_that_stalls_or_runs_past_its_limit_is_killed_with_its_group_and_says_which_limit() {
    let (w, hooks) = pending_2_0_0();
    let dir = hooks.to_str().unwrap();
    w.edit("recipes/fixture-pure.toml", "[build]\n", "[build]\nstall = \"2s\"\n");
    // No output and no CPU time: the stall limit fires.
    let start = Instant::now();
    let out = with_hooks(&w, dir, &[("HOOK_STALL", "1")], &["install", "fixture-pure"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("killed by the stall limit: no output and no CPU time for 2 s"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
    assert!(
        gone(pid_in(&hooks.join("sleeper"))),
        "the build's group outlived the limit"
    );
    assert_eq!(version(&w), "1.0.0");
    // Busy without output: not stalled; the overall limit from the command line fires.
    let start = Instant::now();
    let out = with_hooks(
        &w,
        dir,
        &[("HOOK_BUSY", "1")],
        &["--limit", "4s", "install", "fixture-pure"],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("killed by the time limit after 4 s"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
    assert_eq!(version(&w), "1.0.0");
    // Within its limits it builds.
    installs_2_0_0(&w, dir);
}

#[test]
fn a_bad_time_limit_is_reported_at_its_line_and_column() {
    let (w, _) = pending_2_0_0();
    w.edit(
        "recipes/fixture-pure.toml",
        "[build]\n",
        "[build]\nstall = \"soon\"\nlimit = \"6h\"\n",
    );
    let out = w.kiln().args(["plan", "fixture-pure"]).output().unwrap();
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("fixture-pure.toml:11:9"), "{err}");
    assert!(err.contains("bad duration `soon` in build.stall"), "{err}");
    assert!(err.contains("`90s`, `20m`, `6h` or `1d`"), "{err}");
    assert!(!err.contains("build.limit"), "{err}");
    let out = w.kiln().args(["--stall", "soon", "plan"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
