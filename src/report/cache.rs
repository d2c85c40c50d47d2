//! `kiln cache` and `kiln cache clean`: the cache's parts with their sizes, the wheels that are
//! built but unverified, and what cleaning freed. It deliberately ignores what is inside an entry.

use std::path::Path;

use serde::Serialize;

use super::megabytes;
use crate::cache_dir::Part;

/// What `kiln cache --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
pub struct Parts<'a> {
    pub cache: &'a Path,
    pub parts: &'a [Part],
    /// Wheels that built but never passed verification (a failure outside them): the next
    /// install verifies them again instead of compiling.
    pub unverified: &'a [Unverified],
}

/// One built-but-unverified wheel in the wheel cache.
#[derive(Debug, Serialize)]
pub struct Unverified {
    pub wheel: std::path::PathBuf,
    /// The failure outside the wheel that stopped its verification.
    pub why: String,
}

/// What `kiln cache clean --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
pub struct Cleaned<'a> {
    pub cache: &'a Path,
    /// Bytes freed, by part.
    pub freed: &'a [(&'a str, u64)],
    /// The entries a lockfile needs, kept.
    pub kept: &'a [String],
    /// The entries a kiln still needs (a live one, or a journal's rollback), left where they are.
    pub skipped: &'a [crate::cache_dir::Skipped],
}

/// The parts, for a person.
pub fn parts(p: &Parts) {
    println!("{}", p.cache.display());
    for part in p.parts {
        println!(
            "  {:8} {:>10}  {:>5} entries  {}",
            part.name,
            megabytes(part.bytes),
            part.entries,
            part.what
        );
    }
    let total: u64 = p.parts.iter().map(|p| p.bytes).sum();
    println!("  total    {:>10}", megabytes(total));
    if !p.unverified.is_empty() {
        println!("built but unverified (the next install verifies them again instead of compiling):");
        for u in p.unverified {
            println!("  {}\n    why: {}", u.wheel.display(), u.why);
        }
    }
}

/// What cleaning freed, for a person.
pub fn cleaned(c: &Cleaned) {
    for (part, bytes) in c.freed {
        println!("cleaned {part}: {}", megabytes(*bytes));
    }
    let total: u64 = c.freed.iter().map(|(_, b)| b).sum();
    let kept = c.kept.len();
    println!(
        "freed {} in {}{}",
        megabytes(total),
        c.cache.display(),
        if kept > 0 {
            format!("; kept the {kept} entries the lockfile needs")
        } else {
            String::new()
        }
    );
    for s in c.skipped {
        println!("skipped {}: {}", s.entry, needed(&s.needed));
    }
}

/// Why a skipped entry stays, in words.
fn needed(n: &crate::cache_dir::Needed) -> String {
    use crate::cache_dir::Needed;
    match n {
        Needed::Journal { journal } => format!(
            "the install journal {} needs it to put an environment back",
            journal.display()
        ),
        Needed::Kiln { holder } => format!("a live kiln holds it: {holder}"),
        Needed::InUse { holder } => format!(
            "a live kiln uses the cache and may be reading it: {holder}; run `kiln cache clean` again once it is done"
        ),
    }
}

/// `kiln cache add-mirror`: where the mirror is and what it holds.
pub fn seeded(s: &crate::store::mirror::Seeded) {
    let verb = if s.replaced { "replaced" } else { "seeded" };
    println!("{verb} the mirror of {} at {}", s.url, s.mirror.display());
    println!(
        "  {} commits, {} branches, {} tags",
        s.commits,
        s.branches.len(),
        s.tags.len()
    );
    for (b, c) in &s.branches {
        println!("  branch {b} {c}");
    }
    for (t, c) in &s.tags {
        println!("  tag {t} {c}");
    }
}
