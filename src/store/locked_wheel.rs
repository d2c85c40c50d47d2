//! The wheel a lock names, found in the wheel cache when this build's own key finds none: a
//! wheel made on the host that wrote the lock (a bundle brings it) whose key differs from this
//! node's only in how it was made. It owns that lookup; keys, records and quarantine are
//! [`super::wheels`]'s, and the entry is bound to the step as any other (its distribution,
//! version, contents and the lock's sha256).

use std::path::Path;

use super::wheels::{Cached, Refused, SHA256, Want, WheelKey, find};

/// The cached wheel a lock names by its sha256 (`want`) when this build's own key finds none:
/// an entry whose record is `want` and whose inputs (`key.json`) agree with this build's
/// `inputs` on everything that decides whether the wheel works here. Two inputs are left out of
/// that comparison: the host compiler and the interpreter's patch version decide how a wheel was
/// made, not where it runs (a wheel's tags name CPython's minor version only, PEP 425), and a
/// lock made on a build host is reproduced on nodes that differ in both (the H200 proof: g++
/// 12.2 and Python 3.12.1 there, g++ 13.3 and 3.12.3 on the node). Returns the entry's key with
/// what it was built with, for the note.
pub fn find_locked(cache: &Path, step: &Want) -> Result<Option<(WheelKey, Cached, String)>, Refused> {
    let (Some(want), inputs) = (step.locked, step.inputs) else {
        return Ok(None);
    };
    let Ok(shards) = std::fs::read_dir(cache.join("wheels")) else {
        return Ok(None);
    };
    let entries = shards
        .filter_map(|s| std::fs::read_dir(s.ok()?.path()).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()));
    for dir in entries {
        let record = crate::state::read(&dir.join(SHA256), 1024, "")
            .ok()
            .flatten()
            .unwrap_or_default();
        if String::from_utf8_lossy(&record).trim() != want {
            continue;
        }
        let Some(theirs) =
            crate::state::read_json::<serde_json::Value>(&dir.join("key.json"), crate::state::RECORD_LIMIT, "")
                .ok()
                .flatten()
        else {
            continue;
        };
        if where_it_runs(&theirs) != where_it_runs(inputs) {
            continue;
        }
        let Some(key) = dir
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| WheelKey(n.to_string()))
        else {
            continue;
        };
        let bound = Want {
            inputs: &theirs,
            ..*step
        };
        if let Some(found) = find(cache, &key, &bound)? {
            let made = format!(
                "built with {} for Python {}",
                theirs["host_compiler"].as_str().unwrap_or("an unknown host compiler"),
                theirs["python"].as_str().unwrap_or("?")
            );
            return Ok(Some((key, found, made)));
        }
    }
    Ok(None)
}

/// A wheel's key inputs without what decides only how it was made: the host compiler, and the
/// interpreter's version cut to major.minor.
fn where_it_runs(inputs: &serde_json::Value) -> serde_json::Value {
    let mut v = inputs.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("host_compiler");
        if let Some(py) = o.get("python").and_then(|p| p.as_str()) {
            let minor: Vec<&str> = py.split('.').take(2).collect();
            o.insert("python".into(), minor.join(".").into());
        }
    }
    v
}
