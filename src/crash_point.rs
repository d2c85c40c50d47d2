//! Named points of kiln's work where a test may stop or kill it, so that crash safety is tried at
//! every point, not only where a subprocess runs long enough to be killed from outside.
//!
//! Owns three test hooks, read once from the environment:
//! - `KILN_TEST_POINTS=<file>`: each point reached appends its name as a line to `<file>`, so a
//!   test learns which points a run passes, in order;
//! - `KILN_TEST_KILL_AT=<name>#<k>`: at the `k`-th time (from 1) the point `<name>` is reached,
//!   kiln sends itself `SIGKILL`, as a power cut or the OOM killer would end it (a point is
//!   named by what happens there, not by a position, so that a kill replays where threads
//!   interleave differently: the `k`-th write of one file is the same step in every run);
//! - `KILN_TEST_PAUSE_AT=<name>:<file>`: at the point, kiln writes its pid to `<file>` and sleeps,
//!   so that a test can kill it there itself.
//!
//! It ignores what happens at a point: callers name it; without the variables a point costs one
//! load of a cached `Option`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

struct Hooks {
    trace: Option<std::path::PathBuf>,
    kill_at: Option<(String, u32)>,
    pause_at: Option<(String, String)>,
    seen: Mutex<HashMap<String, u32>>,
}

fn hooks() -> Option<&'static Hooks> {
    static HOOKS: OnceLock<Option<Hooks>> = OnceLock::new();
    HOOKS
        .get_or_init(|| {
            let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let trace = var("KILN_TEST_POINTS").map(std::path::PathBuf::from);
            let kill_at = var("KILN_TEST_KILL_AT").and_then(|v| {
                let (name, k) = v.rsplit_once('#')?;
                Some((name.to_string(), k.parse().ok()?))
            });
            let pause_at = var("KILN_TEST_PAUSE_AT").and_then(|v| {
                let (name, file) = v.split_once(':')?;
                Some((name.to_string(), file.to_string()))
            });
            (trace.is_some() || kill_at.is_some() || pause_at.is_some()).then(|| Hooks {
                trace,
                kill_at,
                pause_at,
                seen: Mutex::new(HashMap::new()),
            })
        })
        .as_ref()
}

/// kiln is about to rename a written file over `path`: the point is named `write DIR/FILE` after
/// the last two parts of the path, each run of 12 or more hex digits (a cache key, an
/// environment's hash) or 4 or more decimal ones (a pid) written `*`, so that it names the same
/// file in every run.
pub fn writing(path: &std::path::Path) {
    if hooks().is_none() {
        return;
    }
    let parts: Vec<String> = path
        .iter()
        .rev()
        .take(2)
        .map(|p| without_hashes(&p.to_string_lossy()))
        .collect();
    let label: Vec<&str> = parts.iter().rev().map(String::as_str).collect();
    reached(&format!("write {}", label.join("/")));
}

/// `text` with each run of 12 or more hex digits, or of 4 or more decimal ones (a pid, a time),
/// written `*`.
fn without_hashes(text: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once('/')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        let number = run.len() >= 4 && run.bytes().all(|b| b.is_ascii_digit());
        out.push_str(if run.len() >= 12 || number { "*" } else { &run });
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// kiln reached the point `name` (see the module doc for what a test can do there).
pub fn reached(name: &str) {
    let Some(h) = hooks() else { return };
    // One line per point, the names counted under one lock, so that the trace and the counts
    // agree where threads reach points together.
    let nth = {
        let mut seen = h.seen.lock().unwrap_or_else(|p| p.into_inner());
        let n = seen.entry(name.to_string()).or_insert(0);
        *n += 1;
        if let Some(file) = &h.trace
            && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file)
        {
            let _ = writeln!(f, "{name}");
        }
        *n
    };
    if let Some((at, k)) = &h.kill_at
        && at == name
        && *k == nth
    {
        // SAFETY: kill(2) of this process with a signal number only sends the signal.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
    if let Some((at, file)) = &h.pause_at
        && at == name
    {
        let _ = std::fs::write(file, std::process::id().to_string());
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
}

#[cfg(test)]
mod tests {
    /// Hashes in a path are written `*`; short hex words (`cafe`, a version) stay.
    #[test]
    fn a_written_file_is_named_without_its_hashes() {
        assert_eq!(super::without_hashes("3fa9c0de12ab45ef.json"), "*.json");
        assert_eq!(super::without_hashes("kiln.json"), "kiln.json");
        assert_eq!(super::without_hashes("live-123456.lock"), "live-*.lock");
        assert_eq!(super::without_hashes(".key.9131.tmp"), ".key.*.tmp");
        assert_eq!(super::without_hashes("fixture-cafe-1.0.0"), "fixture-cafe-1.0.0");
        assert_eq!(super::without_hashes(".key.json.Ab3f9x.tmp"), ".key.json.Ab3f9x.tmp");
    }
}
