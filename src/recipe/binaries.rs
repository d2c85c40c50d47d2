//! What a recipe says about prebuilt binaries: the wheels a version offers next to its source
//! (`wheels = [...]` in `[[versions]]`) and the CUDA binaries that may lack an image on some
//! archs (`[[binaries.optional]]`), each with the reason and its upstream source.
//!
//! It only holds and matches what the recipe wrote: a wheel's tags come from its file name (the
//! binary distribution format, <https://packaging.python.org/en/latest/specifications/binary-distribution-format/>);
//! which tags an interpreter supports is the interpreter's answer (the probe asks it), and
//! whether a binary holds an image is the fatbin reader's and the run rules' question.

use std::ops::Range;

use pep440_rs::{Version, VersionSpecifiers};
use serde::Serialize;

use crate::arch::Arch;

/// One prebuilt wheel of a version: where it is, its pinned sha256, and what its file name says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrebuiltWheel {
    pub url: String,
    pub sha256: String,
    /// The file name (the URL's last segment, percent-decoded).
    pub file: String,
    /// Every tag of the file name's compressed tag sets, `py-abi-platform` (`cp38-abi3-manylinux_2_28_x86_64`).
    pub tags: Vec<String>,
    #[serde(skip)]
    pub span: Option<Range<usize>>,
}

/// What a wheel's file name says: `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    pub name: String,
    pub version: Version,
    /// Each combination of the compressed tag sets (`py2.py3-none-any` is two tags).
    pub tags: Vec<String>,
}

/// Reads a wheel file name; `Err` says what is wrong with it.
pub fn parse_wheel_name(file: &str) -> Result<WheelName, String> {
    let stem = file
        .strip_suffix(".whl")
        .ok_or_else(|| format!("`{file}` does not end in .whl"))?;
    let parts: Vec<&str> = stem.split('-').collect();
    if !(parts.len() == 5 || parts.len() == 6) || parts.iter().any(|p| p.is_empty()) {
        return Err(format!("`{file}` is not NAME-VERSION(-BUILD)-PYTHON-ABI-PLATFORM.whl"));
    }
    let version = parts[1]
        .parse::<Version>()
        .map_err(|e| format!("`{}` in `{file}` is not a PEP 440 version: {e}", parts[1]))?;
    let n = parts.len();
    let mut tags = Vec::new();
    for py in parts[n - 3].split('.') {
        for abi in parts[n - 2].split('.') {
            for plat in parts[n - 1].split('.') {
                tags.push(format!("{py}-{abi}-{plat}"));
            }
        }
    }
    Ok(WheelName {
        name: parts[0].to_string(),
        version,
        tags,
    })
}

/// The last path segment of a URL (or path), without query or fragment, with `%XX` decoded.
pub fn file_name_of(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path.rsplit('/').next().unwrap_or(path);
    let bytes = last.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `[[binaries.optional]]`: binaries of the distribution (globs over its RECORD paths) that may
/// lack a usable image on some target archs, and why.
#[derive(Debug, Clone, Serialize)]
pub struct OptionalBinaries {
    /// The globs as written (`vllm/vllm_flash_attn/_vllm_fa3_C*.so`); `*` stays within a path
    /// segment, `**` crosses them.
    pub files: Vec<String>,
    #[serde(skip)]
    pub matcher: globset::GlobSet,
    /// The target archs on which they are optional.
    pub arch: Vec<Arch>,
    /// The component versions this holds for (PEP 440 specifiers); `None` for every version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<String>,
    #[serde(skip)]
    pub versions_spec: Option<VersionSpecifiers>,
    /// The reason, with its upstream source.
    pub why: String,
    #[serde(skip)]
    pub span: Option<Range<usize>>,
}

impl OptionalBinaries {
    /// Whether the binary at RECORD path `path` of version `version` (unknown: every version)
    /// is optional on `arch` by this entry.
    pub fn covers(&self, path: &str, arch: Arch, version: Option<&Version>) -> bool {
        self.arch.contains(&arch)
            && match (&self.versions_spec, version) {
                (Some(spec), Some(v)) => spec.contains(v),
                _ => true,
            }
            && self.matcher.is_match(path)
    }
}

/// The first entry of `entries` that makes `path` optional on `arch` for `version`.
pub fn optional_for<'a>(
    entries: &'a [OptionalBinaries],
    path: &str,
    arch: Arch,
    version: Option<&Version>,
) -> Option<&'a OptionalBinaries> {
    entries.iter().find(|e| e.covers(path, arch, version))
}

/// `[[backends]] binaries = [...]`: the CUDA binaries of the consumer's distribution (globs over
/// its RECORD paths) that only the backends naming them need.
#[derive(Debug, Clone, Serialize)]
pub struct ServedBinaries {
    pub files: Vec<String>,
    #[serde(skip)]
    pub matcher: globset::GlobSet,
}

impl ServedBinaries {
    /// Whether the binary at RECORD path `path` is one of them.
    pub fn names(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }
}

/// A glob set for `files`, `*` kept within one path segment; the first bad glob's error.
pub fn glob_set(files: &[&str]) -> Result<globset::GlobSet, (usize, String)> {
    let mut b = globset::GlobSetBuilder::new();
    for (i, f) in files.iter().enumerate() {
        let g = globset::GlobBuilder::new(f)
            .literal_separator(true)
            .build()
            .map_err(|e| (i, e.kind().to_string()))?;
        b.add(g);
    }
    b.build().map_err(|e| (0, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_names_expand_their_compressed_tag_sets() {
        let w = parse_wheel_name("vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl").unwrap();
        assert_eq!(w.name, "vllm");
        assert_eq!(w.version.to_string(), "0.33.0");
        assert_eq!(w.tags, ["cp38-abi3-manylinux_2_28_x86_64"]);
        let w = parse_wheel_name("six-1.17.0-1-py2.py3-none-any.whl").unwrap();
        assert_eq!(w.tags, ["py2-none-any", "py3-none-any"]);
        let w =
            parse_wheel_name("torch-2.15.0+cu132-cp311-cp311-manylinux_2_28_x86_64.manylinux2014_x86_64.whl").unwrap();
        assert_eq!(w.version.to_string(), "2.15.0+cu132");
        assert_eq!(w.tags.len(), 2);
        for bad in [
            "x.tar.gz",
            "vllm-0.33.0-cp38-abi3.whl",
            "a-1-2-3-4-5-6.whl",
            "a-x y-py3-none-any.whl",
        ] {
            assert!(parse_wheel_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn url_file_names_are_decoded() {
        assert_eq!(
            file_name_of("https://h/whl/cu132/torch-2.15.0%2Bcu132-cp311-cp311-linux_x86_64.whl#sha256=ab"),
            "torch-2.15.0+cu132-cp311-cp311-linux_x86_64.whl"
        );
        assert_eq!(file_name_of("/tmp/w/x-1-py3-none-any.whl"), "x-1-py3-none-any.whl");
    }

    #[test]
    fn optional_binaries_match_by_glob_arch_and_version() {
        let o = OptionalBinaries {
            files: vec![
                "vllm/vllm_flash_attn/_vllm_fa3_C*.so".into(),
                "vllm/_flashmla_*.so".into(),
            ],
            matcher: glob_set(&["vllm/vllm_flash_attn/_vllm_fa3_C*.so", "vllm/_flashmla_*.so"]).unwrap(),
            arch: vec!["12.0".parse().unwrap()],
            versions: Some(">=0.33".into()),
            versions_spec: Some(">=0.33".parse().unwrap()),
            why: "Hopper only".into(),
            span: None,
        };
        let a120: Arch = "12.0".parse().unwrap();
        let a90: Arch = "9.0".parse().unwrap();
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert!(o.covers("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so", a120, Some(&v("0.33.0"))));
        assert!(o.covers("vllm/_flashmla_C.abi3.so", a120, None));
        assert!(!o.covers("vllm/_flashmla_C.abi3.so", a90, None));
        assert!(!o.covers("vllm/_flashmla_C.abi3.so", a120, Some(&v("0.20.0"))));
        // `*` does not cross a directory.
        assert!(!o.covers("vllm/x/_flashmla_C.abi3.so", a120, None));
        assert!(glob_set(&["a/[b.so"]).is_err());
    }
}
