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
    // A cause that ends in `:` (CMake's `CMake Error at FILE:LINE (message):`) says what it is
    // on the indented lines after it: up to four of them are added to it.
    let mut open: Option<usize> = None;
    let mut added = 0;
    while found.len() < n || open.is_some() {
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
        let raw = String::from_utf8_lossy(&buf);
        let line = raw.trim();
        if let Some(i) = open {
            if raw.starts_with([' ', '\t']) && !line.is_empty() && added < 4 {
                added += 1;
                seen.insert(line.to_string());
                found[i] = clip(format!("{} {line}", found[i]));
                continue;
            }
            open = None;
        }
        if found.len() >= n {
            break;
        }
        // kiln's own header naming the command is not output.
        if line.starts_with("$ ") {
            continue;
        }
        let lower = line.to_lowercase();
        if CAUSE_MARKS.iter().any(|m| lower.contains(m))
            && !NOT_CAUSES.iter().any(|m| lower.contains(m))
            && seen.insert(line.to_string())
        {
            found.push(format!("line {number}: {}", clip(line.to_string())));
            if line.ends_with(':') {
                open = Some(found.len() - 1);
                added = 0;
            }
        }
    }
    found
}

/// `text` cut to 300 bytes (at a character), marked with `…` where cut.
fn clip(mut text: String) -> String {
    if text.len() > 300 {
        let cut = (0..=300).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
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

    /// CMake says what its error is on the indented lines after `CMake Error at ... (message):`;
    /// the cause carries them. Ground truth: vLLM 0.26.0's configure against a toolkit found
    /// only under CUDA_HOME (docs/gpu-proof.md §17), where kiln showed the header line alone.
    #[test]
    fn a_cmake_error_carries_the_message_on_the_lines_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("step.log");
        let text = "-- Found Python\n\
                    CMake Error at /t/share/cmake/Caffe2/Caffe2Config.cmake:90 (message):\n  \
                    Your installed Caffe2 version uses CUDA but I cannot find the CUDA\n  \
                    libraries.  Please set the proper CUDA prefixes and / or install CUDA.\n\
                    Call Stack (most recent call first):\n  \
                    CMakeLists.txt:111 (find_package)\n";
        std::fs::write(&log, text).unwrap();
        let causes = super::cause_lines(&log, 0, 8);
        assert_eq!(
            causes,
            [
                "line 2: CMake Error at /t/share/cmake/Caffe2/Caffe2Config.cmake:90 (message): Your installed Caffe2 \
              version uses CUDA but I cannot find the CUDA libraries.  Please set the proper CUDA prefixes and / or \
              install CUDA."
            ]
        );
    }
}
