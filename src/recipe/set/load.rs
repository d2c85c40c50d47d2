//! Parsing many recipe files at once: each file on its own, spread over the machine's cores in
//! blocks taken from a shared counter (so a slow core does not hold the rest up), the results put
//! back in file order. Each parsed recipe also gets its sorted dependency names here, the one
//! piece of per-recipe work that needs no other file.
//!
//! It deliberately does nothing that needs two files at once; [`super::check`] does that after.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::recipe::model::Recipe;
use crate::recipe::parse::{Rejected, parse};

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
pub(super) fn parse_all(files: &[File]) -> Vec<Vec<Result<Recipe, Rejected>>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(MAX_THREADS).min(files.len() / MIN_PER_THREAD).max(1);
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

fn one((file, src, dir): &File) -> Result<Recipe, Rejected> {
    let mut r = parse(file, src, dir.clone())?;
    let mut names: Vec<String> = r.depends_all().map(|d| d.name.clone()).collect();
    names.sort_unstable();
    names.dedup();
    r.depends_sorted = names;
    Ok(r)
}
