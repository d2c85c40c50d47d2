//! What a CUDA toolkit's directory holds besides `nvcc`: the library directories, the
//! unversioned libraries a link finds, the driver stub, the library headers and the CUDA version
//! of its headers (`CUDA_VERSION` in `include/cuda.h`). Read once per run from the toolkit's home
//! (the directory above `bin/nvcc`), by looking at file names only.
//!
//! It deliberately ignores whether a library or header is complete or loads, and which parts a
//! build needs (`recipe::toolkit`; judged by `resolve::toolkit_parts`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The headers looked for under `include/` (the ones `recipe::toolkit::ToolkitPart::HEADERS`
/// names; kept here too so that the probe stays below the recipe layer).
const HEADERS: [&str; 5] = [
    "cuda_runtime_api.h",
    "cusparse.h",
    "cublas_v2.h",
    "cublasLt.h",
    "cusolverDn.h",
];

/// What the toolkit at `home` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolkitLayout {
    pub home: PathBuf,
    /// `home/lib64` is a directory.
    pub lib64: bool,
    /// The unversioned `libcudart.so`, in `lib64` or `lib`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudart: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvrtc: Option<PathBuf>,
    /// `stubs/libcuda.so`, in `lib64` or `lib`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_stub: Option<PathBuf>,
    /// Headers of [`HEADERS`] that `include/` lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers_missing: Vec<String>,
    /// The CUDA version of its headers (`13.0` for `#define CUDA_VERSION 13000`), if `cuda.h`
    /// says one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_version: Option<String>,
}

impl ToolkitLayout {
    /// The places a library `rel` (`libcudart.so`, `stubs/libcuda.so`) is looked for, in order.
    pub fn lib_places(home: &Path, rel: &str) -> [PathBuf; 2] {
        [home.join("lib64").join(rel), home.join("lib").join(rel)]
    }
}

/// Reads the toolkit whose home is `home`.
pub fn read(home: &Path) -> ToolkitLayout {
    let find = |rel: &str| ToolkitLayout::lib_places(home, rel).into_iter().find(|p| p.exists());
    let include = home.join("include");
    ToolkitLayout {
        home: home.to_path_buf(),
        lib64: home.join("lib64").is_dir(),
        cudart: find("libcudart.so"),
        nvrtc: find("libnvrtc.so"),
        driver_stub: find("stubs/libcuda.so"),
        headers_missing: HEADERS
            .iter()
            .filter(|h| !include.join(h).is_file())
            .map(|h| h.to_string())
            .collect(),
        header_version: std::fs::read_to_string(include.join("cuda.h"))
            .ok()
            .and_then(|t| header_version(&t)),
    }
}

/// `13.0` from the line `#define CUDA_VERSION 13000` of `cuda.h`.
fn header_version(cuda_h: &str) -> Option<String> {
    let n: u64 = cuda_h.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("#define") && w.next() == Some("CUDA_VERSION"))
            .then(|| w.next()?.parse().ok())
            .flatten()
    })?;
    Some(format!("{}.{}", n / 1000, (n % 1000) / 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_version_is_read_from_cuda_h() {
        assert_eq!(
            header_version("/* x */\n#define CUDA_VERSION 13000\n").as_deref(),
            Some("13.0")
        );
        assert_eq!(header_version("#define CUDA_VERSION 12080\n").as_deref(), Some("12.8"));
        assert_eq!(header_version("#define CUDA_VERSION_MAJOR 13\n"), None);
    }
}
