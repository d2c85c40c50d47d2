//! The module map of `docs/ARCHITECTURE.md`, enforced: every `crate::X` path in a module points
//! to a module of strictly lower rank, and no source file grows past 500 lines.
//!
//! Reads the source tree as text; it does not try to understand macros or `super::` paths.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rank of each top-level module (higher may import lower; equal ranks never import each other).
/// Keep in step with the map in `docs/ARCHITECTURE.md`.
const RANKS: &[(&str, u32)] = &[
    ("main", 10),
    ("commands", 9),
    ("cli", 8),
    ("report", 8),
    ("session", 7),
    ("bundle", 6),
    ("cache_dir", 5),
    ("draft", 5),
    ("apply", 4),
    ("lock", 4),
    ("resolve", 3),
    ("probe", 2),
    ("recipe", 2),
    ("settings", 2),
    ("compile_cache", 1),
    ("store", 1),
    ("arch", 0),
    ("fatbin", 0),
    ("process", 0),
    ("names", 0),
    ("download", 0),
    ("state", 0),
    ("shown", 0),
    ("watch", 0),
    ("crash_point", 0),
];

const MAX_LINES: usize = 500;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/apply/step.rs` → `apply`, `src/lock.rs` → `lock`).
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_string()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The top-level modules named by `crate::` (or `kiln::` in the binary) paths in `text`,
/// including every name inside `crate::{a::B, c}` groups. Comments are skipped.
fn imported_modules(text: &str, root: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let prefix = format!("{root}::");
        let mut rest = code;
        while let Some(at) = rest.find(&prefix) {
            let preceded_by_ident = rest[..at].chars().last().is_some_and(is_ident);
            rest = &rest[at + prefix.len()..];
            if preceded_by_ident {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                // Top-level names of the group: split at depth-0 commas.
                let mut depth = 0;
                let mut item = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            found.push(item.trim().split("::").next().unwrap_or("").to_string());
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    item.push(c);
                }
                found.push(item.trim().split("::").next().unwrap_or("").to_string());
            } else {
                found.push(rest.chars().take_while(|c| is_ident(*c)).collect());
            }
        }
    }
    found.retain(|m| !m.is_empty() && m != "self");
    found
}

#[test]
fn no_module_imports_one_above_it_or_beside_it() {
    let ranks: BTreeMap<&str, u32> = RANKS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let from = module_of(file);
        if from == "lib" {
            continue;
        }
        let from_rank = *ranks
            .get(from.as_str())
            .unwrap_or_else(|| panic!("{}: module `{from}` has no rank in tests/it/layers.rs", file.display()));
        let text = std::fs::read_to_string(file).unwrap();
        let root = if from == "main" { "kiln" } else { "crate" };
        for to in imported_modules(&text, root) {
            if to == from {
                continue;
            }
            let to_rank = *ranks.get(to.as_str()).unwrap_or_else(|| {
                panic!(
                    "{}: imports `{to}`, which has no rank in tests/it/layers.rs",
                    file.display()
                )
            });
            if to_rank >= from_rank {
                wrong.push(format!(
                    "{}: `{from}` (rank {from_rank}) imports `{to}` (rank {to_rank})",
                    file.strip_prefix(src()).unwrap().display()
                ));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports against the module map:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_source_file_is_over_500_lines() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    long.sort();
    assert!(long.is_empty(), "files over {MAX_LINES} lines:\n{}", long.join("\n"));
}

#[test]
fn the_import_scanner_reads_groups_and_skips_comments() {
    let text = "use crate::{arch::Arch, probe::{self, x}, report};\n// crate::commands\nlet a = crate::lock::read();\nmy_crate::apply::x();";
    assert_eq!(imported_modules(text, "crate"), vec!["arch", "probe", "report", "lock"]);
}
