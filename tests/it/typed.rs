//! No decision reads a verdict's words back: verdicts carry typed reasons (`resolve::reason`),
//! and only `report/` renders them. This reads the source of the modules that decide
//! (`resolve`, `session`, `build`, `commands`) and fails on code that matches on rendered text:
//! a verdict field (`evidence`, `why`, `reason`, `note`) tested with `starts_with`, `contains`,
//! `ends_with`, `find`, `split`, `strip_prefix` or compared with `==`/`!=`, and a comparison
//! with a status word as a string literal (`o.result == "done"`).
//!
//! Reads the source as text; test modules (from `#[cfg(test)]` on) and comments are skipped: an
//! assertion on words is a test of the words, not a decision.

use std::path::{Path, PathBuf};

/// Fields that hold (or held) a verdict's words.
const FIELDS: &[&str] = &["evidence", "why", "reason", "note"];
/// What reads words back.
const READS: &[&str] = &[
    ".starts_with(",
    ".contains(",
    ".ends_with(",
    ".find(",
    ".split",
    ".strip_prefix(",
    ".strip_suffix(",
    " == ",
    " != ",
];
/// Calls that may stand between the field and the read (`a.why.as_str().contains(..)`).
const THROUGH: &[&str] = &[
    ".as_str()",
    ".as_deref()",
    ".as_ref()",
    ".to_string()",
    ".to_lowercase()",
    ".trim()",
];
/// Status and result words: compared as string literals they are a decision on text.
const WORDS: &[&str] = &[
    "ok",
    "done",
    "kept",
    "failed",
    "skipped",
    "blocked",
    "broken",
    "missing",
    "outdated",
    "stale",
    "wrong-arch",
    "unsupported",
];

/// The lines of `source` (1-based, as written) that decide on rendered words.
fn text_decisions(source: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        if reads_a_field(code) || compares_a_word(code) || code.contains("NOT_PROVEN") {
            out.push((i + 1, line.trim().to_string()));
        }
    }
    out
}

fn reads_a_field(code: &str) -> bool {
    FIELDS.iter().any(|field| {
        let dot = format!(".{field}");
        code.match_indices(&dot).any(|(at, _)| {
            let mut rest = &code[at + dot.len()..];
            // A field, not a longer name (`.reasons`, `.why_not`) or a method (`.evidence()`).
            if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '(') {
                return false;
            }
            while let Some(t) = THROUGH.iter().find(|t| rest.starts_with(*t)) {
                rest = &rest[t.len()..];
            }
            READS.iter().any(|r| rest.starts_with(r))
        })
    })
}

fn compares_a_word(code: &str) -> bool {
    WORDS.iter().any(|w| {
        [format!("== \"{w}\""), format!("!= \"{w}\"")]
            .iter()
            .any(|p| code.contains(p))
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.to_string_lossy().ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_decision_reads_a_verdict_back_as_text() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for module in ["resolve", "session", "apply", "store", "commands"] {
        rust_files(&src.join(module), &mut files);
    }
    assert!(
        files.len() > 40,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, code) in text_decisions(&text) {
            found.push(format!("{}:{line}: {code}", f.strip_prefix(&src).unwrap().display()));
        }
    }
    assert!(
        found.is_empty(),
        "decisions on rendered words (match on the typed reason, resolve::Reason, instead):\n  {}",
        found.join("\n  ")
    );
}

/// The scanner catches each decision on words kiln had before its reasons were typed, and
/// passes the typed matches that replaced them.
#[test]
fn the_scanner_catches_the_old_decisions_on_words() {
    let old = [
        "} else if a.status == Status::Blocked && !replaces && !a.evidence.starts_with(super::jit::NOT_PROVEN) {",
        "if let Some(arch) = arch.filter(|t| !a.evidence.contains(t)) {",
        ".filter(|o| o.result == \"done\" && s.set.get(&o.name).is_some_and(|r| r.jit.is_some()))",
        "self.installed[i] = o.result != \"failed\";",
        "if jit.iter().all(|v| v.ok() || v.status == \"skipped\") {",
        "self.status == \"ok\"",
        "let hint = step.reason.as_str().ends_with(\"offline\");",
        "if b.why == why {",
    ];
    for line in old {
        assert_eq!(text_decisions(line).len(), 1, "not caught: {line}");
    }
    let new = [
        "let driver_blocked = a.reasons.iter().any(|r| matches!(r, Reason::DriverTooOld { .. }));",
        ".filter(|o| o.result == StepResult::Done && s.set.get(&o.name).is_some_and(|r| r.jit.is_some()))",
        "if jit.iter().all(|v| matches!(v.status, JitStatus::Ok | JitStatus::Skipped)) {",
        "refusals.push(check.evidence());",
        "let why = l.why.clone(); // a.evidence.contains(x) in a comment",
        "step.reasons.push(Reason::Offline { missing });",
    ];
    for line in new {
        assert_eq!(text_decisions(line), Vec::new(), "wrongly caught: {line}");
    }
    // Test modules are tests of the words, not decisions.
    let with_tests = "fn f() {}\n#[cfg(test)]\nmod tests { fn t() { assert!(v.why.contains(\"x\")); } }\n";
    assert_eq!(text_decisions(with_tests), Vec::new());
}
