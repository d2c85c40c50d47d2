//! What a draft reads out of an sdist (a `.tar.gz`, streamed, never unpacked): `PKG-INFO`, the
//! CMake files, `setup.py`'s extension modules and whether it has a `use_existing_torch.py`.
//! Files over 4 MiB are skipped. It ignores every other member.

use std::io::Read;
use std::path::Path;

use super::{DraftError, Extension};

/// The `PKG-INFO` at the top of an sdist.
pub(super) fn pkg_info(sdist: &Path) -> Result<String, DraftError> {
    let err = |detail: String| DraftError::Read {
        path: sdist.display().to_string(),
        detail,
    };
    let f = std::fs::File::open(sdist).map_err(|e| err(e.to_string()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(f));
    for entry in archive.entries().map_err(|e| err(e.to_string()))? {
        let mut entry = entry.map_err(|e| err(e.to_string()))?;
        let path = entry
            .path()
            .map_err(|e| err(e.to_string()))?
            .to_string_lossy()
            .to_string();
        if path.matches('/').count() == 1 && path.ends_with("/PKG-INFO") && entry.size() < 16 << 20 {
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(|e| err(e.to_string()))?;
            return Ok(text);
        }
    }
    Ok(String::new())
}

pub(super) fn is_cmake(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or("");
    file == "CMakeLists.txt" || file.ends_with(".cmake")
}

/// The files of an sdist a draft reads — its CMake files (`CMakeLists.txt`, `*.cmake`, top-level
/// first), `setup.py`, and any `use_existing_torch.py` — as (path inside the sdist's top
/// directory, text).
pub(super) fn files(sdist: &Path) -> Result<Vec<(String, String)>, DraftError> {
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
        // Inside the sdist's top directory (`vllm-0.33.0/`).
        let inner = path.split_once('/').map_or(path.as_str(), |(_, rest)| rest).to_string();
        let file = inner.rsplit('/').next().unwrap_or("");
        let wanted = is_cmake(&inner) || inner == "setup.py" || file == "use_existing_torch.py";
        // Bounded: a file larger than this is not one a person wrote.
        if !wanted || !entry.header().entry_type().is_file() || entry.size() > 4 << 20 {
            continue;
        }
        let mut text = String::new();
        if entry.read_to_string(&mut text).is_ok() {
            out.push((inner, text));
        }
    }
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
