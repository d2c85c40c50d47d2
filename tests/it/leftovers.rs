//! What a build leaves running ends with its step (issue 23 F9): a build that starts a
//! background child and a `setsid` daemon leaves neither behind, whether it builds or fails,
//! and after a `kill -9` of kiln the next kiln kills both.

use std::time::{Duration, Instant};

use crate::common::{World, text};

/// fixture-pure built by `daemons.sh`: it starts `sleep $HOOK_MARK` twice, once in the
/// background (in the build's group) and once through `setsid` (a session and group of its
/// own), then with `HOOK_WAIT` writes that file and waits for `<it>.go`, with `HOOK_FAIL`
/// fails, else builds the wheel.
fn daemon_world() -> World {
    let w = World::new();
    w.write(
        "packages/kiln-fixture-pure/daemons.sh",
        "#!/bin/sh\n\
         setsid sleep \"$HOOK_MARK\" </dev/null >/dev/null 2>&1 &\n\
         sleep \"$HOOK_MARK\" </dev/null >/dev/null 2>&1 &\n\
         if [ -n \"$HOOK_WAIT\" ]; then\n\
           touch \"$HOOK_WAIT\"\n\
           while [ ! -e \"$HOOK_WAIT.go\" ]; do sleep 0.1; done\n\
         fi\n\
         if [ -n \"$HOOK_FAIL\" ]; then echo 'the build failed on purpose'; exit 3; fi\n\
         exec \"$1\" -m pip wheel --no-deps --no-build-isolation --no-input -w \"$2\" \"$3\"\n",
    );
    w.edit(
        "recipes/fixture-pure.toml",
        "[verify]",
        "[build]\nwheel = [\"sh\", \"{src}/daemons.sh\", \"{python}\", \"{wheel_dir}\", \"{src}\"]\n\n[verify]",
    );
    w
}

/// A `sleep` argument no other test uses.
fn mark(n: u32) -> String {
    format!("{n}.{}", std::process::id())
}

/// The live (not zombie) processes running `sleep MARK`.
fn sleepers(mark: &str) -> Vec<u32> {
    let want = format!("sleep\0{mark}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        })
        .collect()
}

/// The sleepers of `mark` once they are gone (at most 5 s); what is left otherwise.
fn left_after_a_while(mark: &str) -> Vec<u32> {
    let start = Instant::now();
    while !sleepers(mark).is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    sleepers(mark)
}

/// Kills what a failed test left, so that it does not run on for 1,000 s.
fn kill_all(pids: &[u32]) {
    for p in pids {
        let _ = std::process::Command::new("kill").args(["-9", &p.to_string()]).status();
    }
}

fn install(w: &World, env: &[(&str, &str)]) -> std::process::Output {
    let mut c = w.kiln();
    c.args(["install", "fixture-pure"]);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn what_a_build_leaves_running_ends_with_its_step_whether_it_builds_or_fails() {
    let w = daemon_world();
    let failing = mark(1003);
    let out = install(&w, &[("HOOK_MARK", &failing), ("HOOK_FAIL", "1")]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    let left = left_after_a_while(&failing);
    kill_all(&left);
    assert!(left.is_empty(), "a failed build left {left:?} running: {all}");

    let building = mark(1001);
    let out = install(&w, &[("HOOK_MARK", &building)]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    assert!(w.py("import kiln_fixture_pure").is_ok());
    let left = left_after_a_while(&building);
    kill_all(&left);
    assert!(left.is_empty(), "a build that passed left {left:?} running: {all}");
}

#[test]
fn after_a_kill_of_kiln_the_next_kiln_kills_the_builds_daemons_too() {
    use crate::crash::{kill, spawn, wait_for};
    let w = daemon_world();
    let waiting = w.dir.path().join("waiting");
    let m = mark(1002);
    let env = [("HOOK_MARK", m.as_str()), ("HOOK_WAIT", waiting.to_str().unwrap())];
    let mut kiln = spawn(&w, &w.python, &env, &["install", "fixture-pure"]);
    wait_for(&waiting, &mut kiln);
    let start = Instant::now();
    while sleepers(&m).len() < 2 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sleepers(&m).len(), 2, "the build's two sleepers never started");
    kill(&mut kiln, "-9");
    let _ = kiln.wait();
    let out = w.kiln().args(["doctor", "fixture-pure"]).output().unwrap();
    let left = left_after_a_while(&m);
    kill_all(&left);
    assert!(
        left.is_empty(),
        "{left:?} outlived kiln and the next kiln: {}",
        text(&out.stderr)
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("processes left running by a kiln that was stopped"),
        "{err}"
    );
}
