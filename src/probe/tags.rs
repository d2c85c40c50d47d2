//! The wheel tags an interpreter supports, most preferred first, as the interpreter itself says
//! (`packaging.tags.sys_tags()`, or pip's vendored copy where `packaging` is not installed): the
//! same answer pip uses to pick a wheel, so kiln never re-implements the tag rules (manylinux
//! glibc versions, abi3, ...). It deliberately ignores which wheel to choose (that is
//! `resolve::wheel_choice`).

use std::path::Path;
use std::time::Duration;

use crate::process::Cmd;

const SCRIPT: &str = r#"
try:
    from packaging.tags import sys_tags
except ImportError:
    from pip._vendor.packaging.tags import sys_tags
import sys
sys.stdout.write("\n".join(str(t) for t in sys_tags()) + "\n")
"#;

/// The tags `python` supports (`cp311-cp311-manylinux_2_28_x86_64`, ...), best first.
pub fn supported(python: &Path) -> Result<Vec<String>, String> {
    let out = Cmd::new(python.display().to_string())
        .args(["-I", "-B", "-c", SCRIPT])
        .capture(b"", Duration::from_secs(60))
        .map_err(|e| format!("cannot ask {} for its wheel tags: {e}", python.display()))?;
    let tags: Vec<String> = out
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if tags.is_empty() {
        return Err(format!(
            "{} named no wheel tags (neither `packaging` nor pip is importable): {}",
            python.display(),
            out.stderr.trim()
        ));
    }
    Ok(tags)
}

/// [`supported`], kept under `<cache>/probe/tags-<key>.json` while the interpreter is the same
/// file (its resolved path, size and modification time key it), so an unchanged environment is
/// asked again without starting Python; `refresh` asks anyway. Only answers are kept.
pub fn cached(python: &Path, cache: &Path, refresh: bool) -> Result<Vec<String>, String> {
    use sha2::{Digest, Sha256};
    let real = std::fs::canonicalize(python).unwrap_or_else(|_| python.to_path_buf());
    let stamp = std::fs::metadata(&real).ok().map(|m| {
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        format!("{}\n{}\n{}\n{}", python.display(), real.display(), m.len(), mtime)
    });
    let Some(stamp) = stamp else {
        return supported(python);
    };
    let key = hex::encode(&Sha256::digest(stamp.as_bytes())[..12]);
    let file = cache.join("probe").join(format!("tags-{key}.json"));
    if !refresh && let Some(tags) = crate::state::cached_json::<Vec<String>>(&file).filter(|t| !t.is_empty()) {
        return Ok(tags);
    }
    let tags = supported(python)?;
    if let Ok(bytes) = serde_json::to_vec(&tags) {
        let _ = crate::store::atomic::write(&file, &bytes, crate::store::atomic::Sync::Cache);
    }
    Ok(tags)
}
