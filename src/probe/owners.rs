//! Who owns an import package: the installed distributions whose `RECORD` lists a file in a
//! top-level package directory (`sgl_kernel/...`) or a top-level module of that name
//! (`sgl_kernel.py`, `sgl_kernel.abi3.so`). Two distributions in one directory is what a renamed
//! package leaves behind when the new name is installed over the old one; `RECORD` is the one
//! record of which files a distribution installed, so it is what is read.
//!
//! Only what is asked is read: a package with no entry in any site-packages directory costs one
//! directory listing per location, and `RECORD`s are read only where the package is present
//! (about 8 ms for the 200 distributions of a vLLM environment). [`fill_cached`] remembers the
//! answer in `<cache>/probe/owners-<key>.json` while the directory of every location keeps its
//! mtime: installing or removing a distribution adds or removes its `.dist-info` there. It
//! deliberately ignores what the files are (`binaries` reads those) and namespace packages
//! shared by design (a recipe names only packages it owns alone).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::python::PythonFacts;

/// Fills `facts.owners` for `packages`: each one present, with the distributions that own files
/// in it (normalized names, sorted). A package nobody installed has no entry.
pub fn fill(facts: &mut PythonFacts, packages: &[String]) {
    facts.owners = find(facts, packages);
}

/// [`fill`], answered from `cache` while no location changed since the answer was stored there.
pub fn fill_cached(facts: &mut PythonFacts, packages: &[String], cache: &Path) {
    if packages.is_empty() {
        facts.owners = BTreeMap::new();
        return;
    }
    let locations: BTreeSet<&str> = facts.dists.values().filter_map(|d| d.location.as_deref()).collect();
    let mut stamp = format!("{packages:?}");
    for loc in &locations {
        let mtime = std::fs::metadata(loc).map_or(-1, |m| m.mtime() * 1_000_000_000 + m.mtime_nsec());
        stamp.push_str(&format!("\0{loc}\0{mtime}"));
    }
    let key = hex::encode(Sha256::digest(facts.python.executable.as_bytes()));
    let file = cache.join("probe").join(format!("owners-{}.json", &key[..16]));
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Stored {
        stamp: String,
        owners: BTreeMap<String, Vec<String>>,
    }
    let stored: Option<Stored> = crate::state::cached_json(&file);
    if let Some(s) = stored.filter(|s| s.stamp == stamp) {
        facts.owners = s.owners;
        return;
    }
    fill(facts, packages);
    let text = serde_json::to_vec(&Stored {
        stamp,
        owners: facts.owners.clone(),
    });
    // A cache that cannot be written costs the next run a read of the RECORDs, nothing else.
    // Concurrent `doctor` runs each rename a whole file of their own (no shared temporary name).
    if let Ok(text) = text {
        let _ = crate::store::atomic::write(&file, &text, crate::store::atomic::Sync::Cache);
    }
}

/// The owners of each of `packages` that some distribution installed files into.
pub fn find(facts: &PythonFacts, packages: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if packages.is_empty() {
        return out;
    }
    let locations: BTreeSet<&str> = facts.dists.values().filter_map(|d| d.location.as_deref()).collect();
    for loc in locations {
        let present: Vec<&String> = packages.iter().filter(|p| present_in(Path::new(loc), p)).collect();
        if present.is_empty() {
            continue;
        }
        for (name, d) in facts.dists.iter().filter(|(_, d)| d.location.as_deref() == Some(loc)) {
            let Some(info) = &d.dist_info else { continue };
            let Ok(record) = std::fs::read_to_string(Path::new(info).join("RECORD")) else {
                continue;
            };
            for p in present.iter().filter(|p| owns(&record, p)) {
                let owners = out.entry(p.to_string()).or_default();
                if !owners.contains(name) {
                    owners.push(name.clone());
                }
            }
        }
    }
    for owners in out.values_mut() {
        owners.sort();
    }
    out
}

/// Whether `dir` holds an entry named `package` or `package.<anything>`.
fn present_in(dir: &Path, package: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name == package || name.strip_prefix(package).is_some_and(|rest| rest.starts_with('.'))
    })
}

/// Whether a `RECORD` lists a file in `package/` or the top-level module `package.*`.
pub fn owns(record: &str, package: &str) -> bool {
    if !record.contains(package) {
        return false;
    }
    record.lines().any(|line| {
        let path = line.trim_start_matches('"').split(',').next().unwrap_or("");
        match path.split_once('/') {
            Some((top, _)) => top == package,
            None => path.split('.').next() == Some(package) && path.len() > package.len(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_owns_a_package_by_its_directory_or_its_top_level_module() {
        let record = "sgl_kernel/__init__.py,sha256=x,1\nsgl_kernel-0.3.21.dist-info/RECORD,,\n";
        assert!(owns(record, "sgl_kernel"));
        assert!(!owns(record, "sgl"));
        assert!(!owns("sgl_kernel_extra/x.py,,\n", "sgl_kernel"));
        assert!(owns(
            "_mscclpp.cpython-310-x86_64-linux-gnu.so,sha256=y,2\n",
            "_mscclpp"
        ));
        assert!(!owns("../../bin/sgl_kernel,,\n", "sgl_kernel"));
    }
}
