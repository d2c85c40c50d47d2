//! Parsing many recipe files at once: each file on its own, spread over the machine's cores in
//! blocks taken from a shared counter (so a slow core does not hold the rest up), the results put
//! back in file order. The per-recipe work that needs no other file is done here too: the file
//! name must be the component name, and the sorted dependency names are kept for graph walks.
//!
//! It deliberately does nothing that needs two files at once; [`super::check`] does that after.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::path::Path;

use crate::recipe::diag::Diagnostic;
use crate::recipe::model::Recipe;
use crate::recipe::parse::{Rejected, parse};

/// One file, loaded.
// Nearly every file is a recipe: boxing it would cost an allocation per file for nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Loaded {
    /// A recipe in a file named after it, with its name (the key it goes by).
    Named(String, Recipe),
    /// A recipe in a file named after something else.
    Misnamed(Diagnostic),
    /// A file with problems.
    Rejected(Rejected),
}

/// A recipe file: the name shown to users, its text, and the directory relative paths resolve
/// against (`None` for embedded recipes).
pub(super) type File = (String, String, Option<PathBuf>);

/// Files taken at a time by one thread.
const BLOCK: usize = 128;
/// Fewer files per thread than this are not worth a thread.
const MIN_PER_THREAD: usize = 512;
/// More threads than this find no more work in any recipe set seen so far.
const MAX_THREADS: usize = 8;

/// Every file parsed, in the order given (in blocks, to save moving the results once more).
pub(super) fn parse_all(files: &[File]) -> Vec<Vec<Loaded>> {
    // Asked only for large sets: the answer reads cgroup files, which small sets need not pay for.
    let most = (files.len() / MIN_PER_THREAD).min(MAX_THREADS);
    let threads = match most {
        0 | 1 => 1,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()).min(most),
    };
    if threads == 1 {
        return vec![files.iter().map(one).collect()];
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let start = next.fetch_add(BLOCK, Ordering::Relaxed);
            if start >= files.len() {
                return done;
            }
            let block = &files[start..(start + BLOCK).min(files.len())];
            done.push((start, block.iter().map(one).collect::<Vec<_>>()));
        }
    };
    let mut blocks = std::thread::scope(|s| {
        let helpers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mut blocks = work();
        for h in helpers {
            match h.join() {
                Ok(b) => blocks.extend(b),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        blocks
    });
    blocks.sort_unstable_by_key(|(start, _)| *start);
    blocks.into_iter().map(|(_, b)| b).collect()
}

fn one((file, src, dir): &File) -> Loaded {
    let mut r = match parse(file, src, dir.clone()) {
        Ok(r) => r,
        Err(rejected) => return Loaded::Rejected(rejected),
    };
    let stem = Path::new(file).file_stem().map(|s| s.to_string_lossy());
    if stem.as_deref() != Some(r.name.as_str()) {
        return Loaded::Misnamed(misnamed(file, src, &r, stem.as_deref().unwrap_or_default()));
    }
    let mut names: Vec<String> = r.depends_all().map(|d| d.name.clone()).collect();
    names.sort_unstable();
    names.dedup();
    r.depends_sorted = names;
    Loaded::Named(r.name.clone(), r)
}

/// A component whose file is named after something else.
fn misnamed(file: &str, src: &str, r: &Recipe, stem: &str) -> Diagnostic {
    let at = src.find("name").map(|i| i..i + 4);
    Diagnostic::new(
        file,
        src,
        at,
        format!("component `{}` is defined in a file named `{stem}.toml`", r.name),
        format!("name the file `{}.toml`", r.name),
    )
}
