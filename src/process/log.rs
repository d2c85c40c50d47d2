//! Reading a step log back: its last lines, and the lines anywhere in one run's output that say
//! what went wrong (the real cause of a failed build is often far above the traceback that ends
//! it). It deliberately ignores running commands and what a cause means (no hints here).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// What marks a line as a cause. Lowercase; matched against the lowercased line.
const CAUSE_MARKS: [&str; 15] = [
    "#error",
    "fatal error",
    "fatal:",
    "error:",
    "error[",
    "cmake error",
    "could not resolve host",
    "temporary failure in name resolution",
    "network is unreachable",
    "failed to connect to",
    "killed",
    "no space left on device",
    "undefined reference",
    "modulenotfounderror",
    "out of memory",
];

/// Lines that only say a subprocess failed, which every pip failure prints.
const NOT_CAUSES: [&str; 4] = [
    "subprocess-exited-with-error",
    "metadata-generation-failed",
    "legacy-install-failure",
    "failed-wheel-build-for-install",
];

/// The first `n` distinct cause lines after byte `from` of the log, each as `line N: text`.
pub fn cause_lines(path: &Path, from: u64, n: usize) -> Vec<String> {
    let Ok(f) = File::open(path) else { return Vec::new() };
    let mut reader = std::io::BufReader::new(f);
    let mut found: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut buf = Vec::new();
    // Line numbers count from the top of the file; matching starts at `from`.
    let (mut number, mut at) = (0usize, 0u64);
    while found.len() < n {
        buf.clear();
        match std::io::BufRead::read_until(&mut reader, b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(len) => {
                number += 1;
                at += len as u64;
            }
        }
        if at <= from {
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        // kiln's own header naming the command is not output.
        if line.starts_with("$ ") {
            continue;
        }
        let lower = line.to_lowercase();
        if CAUSE_MARKS.iter().any(|m| lower.contains(m))
            && !NOT_CAUSES.iter().any(|m| lower.contains(m))
            && seen.insert(line.to_string())
        {
            let mut text = line.to_string();
            if text.len() > 300 {
                let cut = (0..=300).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
                text.truncate(cut);
                text.push('…');
            }
            found.push(format!("line {number}: {text}"));
        }
    }
    found
}

/// The last `n` lines of a file, read from its end (logs can be large).
pub fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut f) = File::open(path) else { return Vec::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Cmd;

    #[test]
    fn the_cause_is_found_far_above_the_last_lines_and_only_in_this_run() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("step.log");
        std::fs::write(&log, "old run\nerror: from an earlier run\n").unwrap();
        let script = "echo building; echo 'ATen.h:5:2: error: #error C++20 or later compatible compiler is required'; \
                      for i in $(seq 1 40); do echo noise $i; done; \
                      echo 'error: subprocess-exited-with-error'; exit 1";
        let e = Cmd::new("sh").args(["-c", script]).run_logged(&log).unwrap_err();
        assert_eq!(e.causes.len(), 1, "{:?}", e.causes);
        assert!(
            e.causes[0].starts_with("line 5: ATen.h:5:2: error: #error C++20"),
            "{:?}",
            e.causes
        );
        assert!(
            !e.tail.iter().any(|l| l.contains("#error")),
            "the tail alone would miss it"
        );
    }
}
