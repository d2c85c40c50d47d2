//! Every command that can take longer than 2 s shows its progress (issue 24, item 3): each
//! command that probes the environment runs here on a fixture whose import takes 3 s, piped,
//! and must print the probe's start line and its end line on stderr (`kiln: probe ...`,
//! `kiln: done probe ... (3.x s)`); under `--json` the same work is JSON events on stderr, and
//! stdout stays one document; under `-q` nothing is shown. The JIT proofs' lines are
//! `jit.rs`'s, the downloads' `bundle_for.rs`'s.

use crate::common::{World, stdout_json, text};

/// fixture-pure 1.0.0 installed; its import then sleeps 3 s where `KILN_TEST_SLOW_IMPORT` is
/// set.
fn slow_import() -> World {
    let w = World::new();
    w.install_ok("fixture-pure");
    let site = w.site_packages();
    let init = site.join("kiln_fixture_pure/__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    std::fs::write(
        &init,
        format!("import os, time\nif os.environ.get('KILN_TEST_SLOW_IMPORT'): time.sleep(3)\n{text}"),
    )
    .unwrap();
    w
}

#[test]
fn every_command_that_probes_shows_a_probe_past_two_seconds_piped_and_as_json_events() {
    let w = slow_import();
    let lock = w.dir.path().join("kiln.lock");
    let lock_arg = lock.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &["doctor", "fixture-pure", "--refresh"],
        &["verify", "fixture-pure", "--refresh"],
        &["plan", "fixture-pure", "--refresh"],
        &["install", "--dry-run", "fixture-pure", "--refresh"],
        &["install", "fixture-pure", "--refresh"],
        &["lock", "fixture-pure", "--refresh", "-o", lock_arg],
    ];
    for args in commands {
        let out = w.kiln().args(*args).env("KILN_TEST_SLOW_IMPORT", "1").output().unwrap();
        let err = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        let start = err.lines().find(|l| l.starts_with("kiln: probe "));
        let done = err.lines().find(|l| l.starts_with("kiln: done probe "));
        assert!(start.is_some() && done.is_some(), "{args:?} shows no probe: {err}");
        let seconds: f64 = done
            .unwrap()
            .rsplit_once('(')
            .and_then(|(_, s)| s.strip_suffix(" s)"))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{args:?}: {err}"));
        assert!(seconds >= 3.0, "{args:?}: the probe took the import's 3 s: {err}");

        // --json: events on stderr, one document on stdout.
        let mut json: Vec<&str> = args.to_vec();
        json.insert(1, "--json");
        let out = w.kiln().args(&json).env("KILN_TEST_SLOW_IMPORT", "1").output().unwrap();
        assert!(out.status.success(), "{json:?}: {}", text(&out.stderr));
        let _ = stdout_json(&out);
        let events: Vec<serde_json::Value> = text(&out.stderr)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let probe: Vec<&serde_json::Value> = events.iter().filter(|e| e["task"] == "probe").collect();
        assert!(
            probe.iter().any(|e| e["event"] == "started") && probe.iter().any(|e| e["event"] == "finished"),
            "{json:?}: {events:?}"
        );

        // -q: nothing of it.
        let mut quiet: Vec<&str> = args.to_vec();
        quiet.insert(0, "-q");
        let out = w
            .kiln()
            .args(&quiet)
            .env("KILN_TEST_SLOW_IMPORT", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{quiet:?}: {}", text(&out.stderr));
        assert!(
            !text(&out.stderr).contains("kiln: probe"),
            "{quiet:?}: {}",
            text(&out.stderr)
        );
    }
}
