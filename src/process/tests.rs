//! Tests of running commands: logs, failures, causes, limits.

use super::*;
use std::time::Instant;

#[test]
fn logged_failure_reports_status_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("x.log");
    let e = Cmd::new("sh")
        .args(["-c", "echo one; echo two >&2; exit 3"])
        .run_logged(&log)
        .unwrap_err();
    assert_eq!(e.status, Exit::Code(3));
    assert_eq!(e.status.to_string(), "exit status 3");
    assert_eq!(e.tail[e.tail.len() - 2..], ["one", "two"]);
    assert!(e.tail[0].starts_with("$ sh -c 'echo one;"));
}

#[test]
fn a_signal_is_typed_and_said_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let e = Cmd::new("sh")
        .args(["-c", "kill -9 $$"])
        .run_logged(&dir.path().join("x.log"))
        .unwrap_err();
    assert_eq!(e.status, Exit::Signal(SIGKILL));
    assert_eq!(e.status.to_string(), "killed by signal 9 (SIGKILL; out of memory?)");
    assert_eq!(serde_json::to_value(&e.status).unwrap(), e.status.to_string());
}

#[test]
fn a_program_that_cannot_start_has_no_status() {
    let dir = tempfile::tempdir().unwrap();
    let e = Cmd::new("/kiln/no/such/program")
        .run_logged(&dir.path().join("x.log"))
        .unwrap_err();
    assert!(matches!(&e.status, Exit::NoStatus(s) if s.starts_with("could not start `/kiln/no/such/program`")));
}

#[test]
fn logged_output_keeps_stdout_and_logs_stderr_within_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("x.log");
    let out = Cmd::new("sh")
        .args(["-c", "echo answer; echo noise >&2"])
        .timeout(Duration::from_secs(30))
        .output_logged(&log)
        .unwrap();
    assert_eq!(out, "answer\n");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("noise") && !logged.contains("answer\n"), "{logged}");
    let start = Instant::now();
    let e = Cmd::new("sleep")
        .arg("5")
        .timeout(Duration::from_millis(200))
        .run_logged(&log)
        .unwrap_err();
    assert_eq!(e.status, Exit::TimedOut(Duration::from_millis(200)));
    assert!(start.elapsed() < Duration::from_secs(4));
}

#[test]
fn capture_times_out() {
    let c = Cmd::new("sleep")
        .arg("5")
        .capture(b"", Duration::from_millis(100))
        .unwrap();
    assert!(matches!(c.status, Exit::TimedOut(_)) && !c.success);
    assert_eq!(c.status.to_string(), "killed after 0 s");
    let c = Cmd::new("cat").capture(b"fed", Duration::from_secs(30)).unwrap();
    assert!(c.success);
    assert_eq!(c.stdout, "fed");
}

#[test]
fn stream_hands_over_lines_and_kills_on_silence_or_stop() {
    // `exec`: a grandchild would hold the pipe open after the kill.
    let script = "echo a; echo b; echo oops >&2; exec sleep 5";
    let mut seen = Vec::new();
    let start = Instant::now();
    let s = Cmd::new("sh")
        .args(["-c", script])
        .stream(b"", Duration::from_secs(30), |l| {
            seen.push(l.to_string());
            Next::Wait(Duration::from_millis(300))
        })
        .unwrap();
    assert_eq!(seen, ["a", "b"]);
    assert_eq!(s.exit, Exit::TimedOut(Duration::from_millis(300)));
    assert!(start.elapsed() < Duration::from_secs(4));

    let s = Cmd::new("sh")
        .args(["-c", "read x; echo \"got $x\"; echo more; exit 4"])
        .stream(b"fed\n", Duration::from_secs(30), |l| {
            assert_eq!(l, "got fed");
            Next::Stop
        })
        .unwrap();
    assert!(!s.exit.success());
    let s = Cmd::new("sh")
        .args(["-c", "echo x; echo err >&2; exit 4"])
        .stream(b"", Duration::from_secs(30), |_| Next::Wait(Duration::from_secs(30)))
        .unwrap();
    assert_eq!((s.exit, s.stderr.as_str()), (Exit::Code(4), "err\n"));
}
