//! What a draft reads out of an sdist (a `.tar.gz`, streamed, never unpacked): `PKG-INFO`, the
//! CMake files, `setup.py`'s extension modules and whether it has a `use_existing_torch.py`.
//! Files over 4 MiB are skipped. It ignores every other member.

use std::io::Read;
use std::path::Path;

use super::{DraftError, Extension};

/// The text of the members `keep` names (by their path inside the sdist's top directory,
/// `vllm-0.33.0/`), each regular file of at most `limit` bytes; nothing for an sdist that is not
/// a `.tar.gz`.
fn members(sdist: &Path, keep: impl Fn(&str) -> bool, limit: u64) -> Result<Vec<(String, String)>, DraftError> {
    let err = |detail: String| DraftError::Read {
        path: sdist.display().to_string(),
        detail,
    };
    let name = sdist.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !(name.ends_with(".tar.gz") || name.ends_with(".tgz")) {
        return Ok(Vec::new());
    }
    let f = std::fs::File::open(sdist).map_err(|e| err(e.to_string()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut out = Vec::new();
    for entry in archive.entries().map_err(|e| err(e.to_string()))? {
        let mut entry = entry.map_err(|e| err(e.to_string()))?;
        let path = entry
            .path()
            .map_err(|e| err(e.to_string()))?
            .to_string_lossy()
            .to_string();
        let inner = path.split_once('/').map_or(path.as_str(), |(_, rest)| rest).to_string();
        if !keep(&inner) || !entry.header().entry_type().is_file() || entry.size() > limit {
            continue;
        }
        let mut text = String::new();
        if entry.read_to_string(&mut text).is_ok() {
            out.push((inner, text));
        }
    }
    Ok(out)
}

/// The `PKG-INFO` at the top of an sdist (empty when it has none).
pub(super) fn pkg_info(sdist: &Path) -> Result<String, DraftError> {
    let found = members(sdist, |p| p == "PKG-INFO", 16 << 20)?;
    Ok(found.into_iter().next().map(|(_, t)| t).unwrap_or_default())
}

pub(super) fn is_cmake(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or("");
    file == "CMakeLists.txt" || file.ends_with(".cmake")
}

/// The files of an sdist a draft reads — its CMake files (`CMakeLists.txt`, `*.cmake`, top-level
/// first), `setup.py`, and any `use_existing_torch.py` — as (path inside the sdist's top
/// directory, text). A file over 4 MiB is not one a person wrote, and is skipped.
pub(super) fn files(sdist: &Path) -> Result<Vec<(String, String)>, DraftError> {
    let wanted = |p: &str| is_cmake(p) || p == "setup.py" || p.rsplit('/').next() == Some("use_existing_torch.py");
    let mut out = members(sdist, wanted, 4 << 20)?;
    // The top-level CMakeLists.txt first: what it sets, the included files read.
    out.sort_by_key(|(p, _)| (p != "CMakeLists.txt", p.matches('/').count(), p.clone()));
    Ok(out)
}

/// The extension modules a `setup.py` names: `Extension(name="...")` or `CMakeExtension(...)`
/// with the name as its first argument or `name=`, one per line.
pub(super) fn extensions_of(setup: &str) -> Vec<Extension> {
    let mut out: Vec<Extension> = Vec::new();
    for (i, line) in setup.lines().enumerate() {
        let Some(at) = line.find("Extension(") else { continue };
        let args = &line[at + "Extension(".len()..];
        let args = args.trim_start().strip_prefix("name=").unwrap_or(args.trim_start());
        let Some(quoted) = args.strip_prefix('"').or_else(|| args.strip_prefix('\'')) else {
            continue;
        };
        let Some(module) = quoted.split(['"', '\'']).next().filter(|m| !m.is_empty()) else {
            continue;
        };
        if !out.iter().any(|e| e.module == module) {
            out.push(Extension {
                module: module.to_string(),
                optional: args.contains("optional=True"),
                at: format!("setup.py:{}", i + 1),
            });
        }
    }
    out
}
