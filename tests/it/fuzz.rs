//! Fuzzing that stays: every reader of untrusted input gets mutated real inputs (the recipes kiln
//! ships, a real lock, a real SM120 cubin, a real bundle) and must answer with a value or an error,
//! never a panic, a hang or a write outside where it was asked to write. A recipe or lock error
//! always says where (file, line, column) and how to fix it.
//!
//! The seeds are the files themselves (`recipes/`, `tests/fixtures/recipes/`, `tests/fuzz/`);
//! proptest draws the mutations from a fixed seed per run and keeps any input that ever failed in
//! `proptest-regressions/`, replayed first on every run. `KILN_FUZZ_CASES` raises the count.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn config(cases: u32) -> Config {
    let cases = std::env::var("KILN_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}

/// One edit of a byte string: overwrite, insert, delete, duplicate a range, or cut the end.
#[derive(Debug, Clone)]
enum Edit {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Repeat(usize, usize),
    Cut(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    // Bytes that matter to the formats: TOML punctuation, quotes, newlines, NUL, high bytes.
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b"[]{}=\"'\n#.,-_:/\\0\xff\x7f".to_vec()),
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(at, b)| Edit::Set(at, b)),
        (any::<usize>(), prop::collection::vec(byte, 1..12)).prop_map(|(at, b)| Edit::Insert(at, b)),
        (any::<usize>(), 1usize..64).prop_map(|(at, n)| Edit::Delete(at, n)),
        (any::<usize>(), 1usize..64).prop_map(|(at, n)| Edit::Repeat(at, n)),
        any::<usize>().prop_map(Edit::Cut),
    ]
}

fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for e in edits {
        let len = v.len().max(1);
        match e {
            Edit::Set(at, b) if !v.is_empty() => {
                let i = at % v.len();
                v[i] = *b;
            }
            Edit::Set(..) => {}
            Edit::Insert(at, b) => {
                let i = at % (v.len() + 1);
                v.splice(i..i, b.iter().copied());
            }
            Edit::Delete(at, n) => {
                let i = at % len;
                let end = (i + n).min(v.len());
                if i < end {
                    v.drain(i..end);
                }
            }
            Edit::Repeat(at, n) => {
                let i = at % len;
                let end = (i + n).min(v.len());
                if i < end {
                    let dup: Vec<u8> = v[i..end].to_vec();
                    v.splice(end..end, dup);
                }
            }
            Edit::Cut(at) => v.truncate(at % len),
        }
    }
    v
}

fn recipe_seeds() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in [repo().join("recipes"), repo().join("tests/fixtures/recipes")] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            out.push((f.display().to_string(), std::fs::read_to_string(&f).unwrap()));
        }
    }
    assert!(out.len() >= 8, "seeds: {}", out.len());
    out
}

fn check_diag(d: &kiln::recipe::Diagnostic, text: &str) -> Result<(), TestCaseError> {
    let lines = text.split('\n').count();
    prop_assert!(d.line >= 1 && d.line <= lines, "line {} of {lines}: {d}", d.line);
    prop_assert!(d.column >= 1, "{d}");
    let help = d.help.as_deref().unwrap_or("");
    prop_assert!(!help.trim().is_empty(), "no fix line: {d}");
    Ok(())
}

#[test]
fn mutated_recipes_are_parsed_or_refused_with_a_place_and_a_fix() {
    let seeds = recipe_seeds();
    let mut runner = proptest::test_runner::TestRunner::new(config(2000));
    let strategy = (0..seeds.len(), prop::collection::vec(edit(), 1..6));
    let refused = std::cell::Cell::new(0usize);
    runner
        .run(&strategy, |(i, edits)| {
            let (file, seed) = &seeds[i];
            let text = String::from_utf8_lossy(&apply(seed.as_bytes(), &edits)).into_owned();
            if let Err(rejected) = kiln::recipe::parse::parse(file, &text, None) {
                refused.set(refused.get() + 1);
                prop_assert!(!rejected.diags.is_empty());
                for d in &rejected.diags {
                    check_diag(d, &text)?;
                }
            }
            Ok(())
        })
        .unwrap();
    assert!(
        refused.get() > 0,
        "no mutation was refused: the fuzzer is not reaching the checks"
    );
}

#[test]
fn mutated_locks_are_read_or_refused_with_a_place_and_a_fix() {
    let seed = std::fs::read_to_string(repo().join("tests/fuzz/kiln.lock")).unwrap();
    assert!(kiln::lock::parse("kiln.lock", &seed).is_ok());
    let mut runner = proptest::test_runner::TestRunner::new(config(2000));
    runner
        .run(&prop::collection::vec(edit(), 1..6), |edits| {
            let text = String::from_utf8_lossy(&apply(seed.as_bytes(), &edits)).into_owned();
            if let Err(kiln::lock::LockError::Invalid(d)) = kiln::lock::parse("kiln.lock", &text) {
                check_diag(&d, &text)?;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn mutated_cubins_are_read_or_refused_never_a_panic() {
    let seed = std::fs::read(repo().join("tests/fuzz/b12x-nvfp4.sm_120a.cubin")).unwrap();
    let good = kiln::fatbin::read_bytes(&seed, "seed").unwrap();
    assert_eq!(good.images().map(|i| i.name()).collect::<Vec<_>>(), ["sm_120a"]);
    let mut runner = proptest::test_runner::TestRunner::new(config(3000));
    runner
        .run(&prop::collection::vec(edit(), 1..8), |edits| {
            let bytes = apply(&seed, &edits);
            if let Ok(r) = kiln::fatbin::read_bytes(&bytes, "mutated") {
                for img in r.images() {
                    let _ = kiln::fatbin::payload(&bytes, img);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// A real bundle: a lock, an sdist and a wheel, as `kiln bundle` lays them out.
fn bundle_seed(dir: &Path) -> Vec<u8> {
    let path = dir.join("seed.tar");
    let mut tar = tar::Builder::new(std::fs::File::create(&path).unwrap());
    let lock = std::fs::read(repo().join("tests/fuzz/kiln.lock")).unwrap();
    let sha = "1465bf364463671e70b9408f4ce6e808f846a7ea78834e713463900b93ba01d6";
    for (name, data) in [
        ("kiln.lock".to_string(), lock),
        (
            format!("sources/{sha}/flashinfer_python-0.7.4.tar.gz"),
            vec![0x1f, 0x8b, 8, 0, 0, 0],
        ),
        (
            "wheelhouse/six-1.17.0-py2.py3-none-any.whl".to_string(),
            b"PK\x05\x06".to_vec(),
        ),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, &name, data.as_slice()).unwrap();
    }
    tar.finish().unwrap();
    drop(tar);
    std::fs::read(&path).unwrap()
}

/// Every file below `root`, relative.
fn files_below(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(p.clone());
            }
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    out
}

#[test]
fn mutated_bundles_are_unpacked_or_refused_and_never_write_outside_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = bundle_seed(tmp.path());
    let mut runner = proptest::test_runner::TestRunner::new(config(300));
    let n = std::cell::Cell::new(0u32);
    runner
        .run(&prop::collection::vec(edit(), 1..6), |edits| {
            n.set(n.get() + 1);
            let root = tmp.path().join(format!("case-{}", n.get()));
            std::fs::create_dir_all(&root).unwrap();
            let bundle = root.join("b.tar");
            std::fs::write(&bundle, apply(&seed, &edits)).unwrap();
            let cache = root.join("cache");
            let set = kiln::recipe::RecipeSet {
                recipes: Default::default(),
                origin: "fuzz".into(),
            };
            let _ = kiln::bundle::unpack(&bundle, &cache, &set, &kiln::watch::Watch::default());
            for f in files_below(&root) {
                prop_assert!(
                    f.starts_with("cache") || f == Path::new("b.tar"),
                    "wrote {} outside the cache",
                    f.display()
                );
            }
            std::fs::remove_dir_all(&root).unwrap();
            Ok(())
        })
        .unwrap();
}
