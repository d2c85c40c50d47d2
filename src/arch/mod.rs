//! The arch vocabulary: what a user means by `--arch`, and how each project spells it.
//!
//! Users say `12.0` (or `sm_120`, `120`, a comma list) once. Each upstream project wants its own
//! spelling, and for some the right spelling depends on the CUDA toolkit version:
//!
//! | dialect      | variable                    | 12.0 with CUDA 12.8 | with CUDA >= 12.9 |
//! |--------------|-----------------------------|---------------------|-------------------|
//! | `torch`      | `TORCH_CUDA_ARCH_LIST`      | `12.0`              | `12.0` (torch rejects `12.0f`) |
//! | `flashinfer` | `FLASHINFER_CUDA_ARCH_LIST` | `12.0a`             | `12.0f`           |
//! | `flash_attn` | `FLASH_ATTN_CUDA_ARCHS`     | `120`               | `120`             |
//! | `cmake`      | `CMAKE_CUDA_ARCHITECTURES`  | `120a-real`         | `120f-real`       |
//!
//! Sources: `f` (family-specific) targets exist from CUDA 12.9 on
//! (<https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features/>);
//! torch's `TORCH_CUDA_ARCH_LIST` allow-list has no `f` entries (pytorch v2.14.1
//! `torch/utils/cpp_extension.py:2699`, `supported_arches`); flashinfer maps a bare `12.0` to
//! `12.0f` with nvcc >= 12.9 and to `12.0a` with 12.8 (flashinfer v0.7.4
//! `flashinfer/compilation_context.py:80-107`, `_normalize_cuda_arch`); flash-attn takes numeric
//! archs only (flash-attention v2.8.3.post2 `setup.py:68-70` and `:179-191`); CMake spells
//! real-only targets `<arch>-real` (<https://cmake.org/cmake/help/latest/prop_tgt/CUDA_ARCHITECTURES.html>).
//!
//! `run` holds the run rules (which kernel image runs on which device and driver). This module
//! deliberately ignores how images are stored in binaries (that is the fatbin reader's job).

pub mod run;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A GPU compute capability, e.g. 12.0 for RTX PRO 6000 / RTX 5090.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Arch {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why an `--arch` value was not understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a GPU arch: expected a compute capability such as `12.0`, `sm_120` or `120`")]
pub struct ArchParseError(pub String);

impl FromStr for Arch {
    type Err = ArchParseError;

    /// Accepts `12.0`, `12.0a`, `12.0f`, `sm_120`, `sm_120a`, `compute_120`, `120`, `90`.
    /// A trailing `a`/`f` names a build target, not a GPU, so it is dropped here.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ArchParseError(s.to_string());
        let t = s.trim();
        let t = t
            .strip_prefix("sm_")
            .or_else(|| t.strip_prefix("compute_"))
            .unwrap_or(t);
        let t = t.strip_suffix(['a', 'f']).unwrap_or(t);
        let (major, minor) = if let Some((ma, mi)) = t.split_once('.') {
            (ma.parse().map_err(|_| err())?, mi.parse().map_err(|_| err())?)
        } else {
            if t.len() < 2 || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            let (ma, mi) = t.split_at(t.len() - 1);
            (ma.parse().map_err(|_| err())?, mi.parse().map_err(|_| err())?)
        };
        if !(3..=20).contains(&major) || minor > 9 {
            return Err(err());
        }
        Ok(Arch { major, minor })
    }
}

/// Parses a comma- or space-separated list of archs, sorted, without duplicates.
pub fn parse_list(s: &str) -> Result<Vec<Arch>, ArchParseError> {
    let mut archs: Vec<Arch> = s
        .split([',', ' ', ';'])
        .filter(|p| !p.is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    if archs.is_empty() {
        return Err(ArchParseError(s.to_string()));
    }
    archs.sort();
    archs.dedup();
    Ok(archs)
}

/// A project's way of spelling an arch list. Recipes name one as `{arch.<dialect>}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    Torch,
    Flashinfer,
    FlashAttn,
    Cmake,
}

impl Dialect {
    pub const ALL: [Dialect; 4] = [Dialect::Torch, Dialect::Flashinfer, Dialect::FlashAttn, Dialect::Cmake];

    pub fn name(self) -> &'static str {
        match self {
            Dialect::Torch => "torch",
            Dialect::Flashinfer => "flashinfer",
            Dialect::FlashAttn => "flash_attn",
            Dialect::Cmake => "cmake",
        }
    }

    pub fn from_name(name: &str) -> Option<Dialect> {
        Dialect::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// Why an arch list cannot be spelled for a project.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DialectError {
    #[error("no target arch: no GPU was found and no --arch was given (e.g. --arch 12.0)")]
    NoArch,
    #[error("spelling {arch} for {dialect} depends on the CUDA toolkit version, and no toolkit was found")]
    NeedsToolkit { arch: Arch, dialect: &'static str },
    #[error("{arch} needs CUDA >= {need}, the toolkit is {have}")]
    ToolkitTooOld {
        arch: Arch,
        need: &'static str,
        have: semver::Version,
    },
}

fn at_least(cuda: &semver::Version, major: u64, minor: u64) -> bool {
    (cuda.major, cuda.minor) >= (major, minor)
}

/// The suffix a family- or arch-specific build needs for `arch` under `cuda`:
/// 12.0 → `f` on CUDA >= 12.9, `a` on 12.8; other 12.x → `a` (>= 12.9); 9.x-11.x → `a`.
fn specific_suffix(arch: Arch, cuda: Option<&semver::Version>, dialect: Dialect) -> Result<&'static str, DialectError> {
    if arch.major < 9 {
        return Ok("");
    }
    let cuda = cuda.ok_or(DialectError::NeedsToolkit {
        arch,
        dialect: dialect.name(),
    })?;
    let too_old = |need| DialectError::ToolkitTooOld {
        arch,
        need,
        have: cuda.clone(),
    };
    match (arch.major, arch.minor) {
        (12, 0) if at_least(cuda, 12, 9) => Ok("f"),
        (12, 0) if at_least(cuda, 12, 8) => Ok("a"),
        (12, 0) => Err(too_old("12.8")),
        (12, _) if at_least(cuda, 12, 9) => Ok("a"),
        (12, _) => Err(too_old("12.9")),
        (10 | 11, _) if !at_least(cuda, 12, 8) => Err(too_old("12.8")),
        _ => Ok("a"),
    }
}

/// Spells `archs` the way `dialect` wants it, for a toolkit of version `cuda` (if known).
///
/// ```
/// use kiln::arch::{parse_list, render, Dialect};
/// let archs = parse_list("sm_120").unwrap();
/// let cuda13 = semver::Version::new(13, 0, 0);
/// assert_eq!(render(Dialect::Flashinfer, &archs, Some(&cuda13)).unwrap(), "12.0f");
/// assert_eq!(render(Dialect::Torch, &archs, Some(&cuda13)).unwrap(), "12.0");
/// assert_eq!(render(Dialect::Cmake, &archs, Some(&semver::Version::new(12, 8, 0))).unwrap(), "120a-real");
/// ```
pub fn render(dialect: Dialect, archs: &[Arch], cuda: Option<&semver::Version>) -> Result<String, DialectError> {
    if archs.is_empty() {
        return Err(DialectError::NoArch);
    }
    let mut parts = Vec::with_capacity(archs.len());
    for &a in archs {
        parts.push(match dialect {
            // torch's cpp_extension allow-list has `12.0` and `12.0a` but no `f` entries (2.11-2.15).
            Dialect::Torch => format!("{}.{}", a.major, a.minor),
            Dialect::Flashinfer => {
                format!("{}.{}{}", a.major, a.minor, specific_suffix(a, cuda, dialect)?)
            }
            // flash-attn's setup.py takes numbers only and adds its own gencode flags.
            Dialect::FlashAttn => format!("{}{}", a.major, a.minor),
            Dialect::Cmake => format!("{}{}{}-real", a.major, a.minor, specific_suffix(a, cuda, dialect)?),
        });
    }
    let sep = match dialect {
        Dialect::Flashinfer => " ",
        _ => ";",
    };
    Ok(parts.join(sep))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> semver::Version {
        semver::Version::parse(s).unwrap()
    }

    #[test]
    fn parses_every_spelling_of_one_arch() {
        for s in ["12.0", "sm_120", "sm_120a", "120", "12.0f", "compute_120"] {
            assert_eq!(s.parse::<Arch>(), Ok(Arch { major: 12, minor: 0 }), "{s}");
        }
        assert_eq!("90".parse::<Arch>(), Ok(Arch { major: 9, minor: 0 }));
        assert!("sm_".parse::<Arch>().is_err());
        assert!("banana".parse::<Arch>().is_err());
        assert!("1".parse::<Arch>().is_err());
        assert_eq!(parse_list("12.0, sm_90,120").unwrap().len(), 2);
    }

    #[test]
    fn dialect_table_from_build_facts_section_5() {
        let a = [Arch { major: 12, minor: 0 }];
        // (dialect, CUDA, expected), from the upstream sources in the module docs.
        let table = [
            (Dialect::Torch, "12.8.0", "12.0"),
            (Dialect::Torch, "13.0.0", "12.0"),
            (Dialect::Flashinfer, "12.8.0", "12.0a"),
            (Dialect::Flashinfer, "12.9.0", "12.0f"),
            (Dialect::Flashinfer, "13.0.0", "12.0f"),
            (Dialect::FlashAttn, "12.8.0", "120"),
            (Dialect::FlashAttn, "13.0.0", "120"),
            (Dialect::Cmake, "12.8.0", "120a-real"),
            (Dialect::Cmake, "13.0.0", "120f-real"),
        ];
        for (d, cuda, want) in table {
            assert_eq!(render(d, &a, Some(&v(cuda))).unwrap(), want, "{d:?} {cuda}");
        }
    }

    #[test]
    fn toolkit_rules_say_no_with_the_reason() {
        let a = [Arch { major: 12, minor: 0 }];
        let e = render(Dialect::Flashinfer, &a, Some(&v("12.4.0"))).unwrap_err();
        assert_eq!(e.to_string(), "12.0 needs CUDA >= 12.8, the toolkit is 12.4.0");
        let e = render(Dialect::Flashinfer, &a, None).unwrap_err();
        assert!(matches!(e, DialectError::NeedsToolkit { .. }));
        // The torch spelling needs no toolkit.
        assert_eq!(render(Dialect::Torch, &a, None).unwrap(), "12.0");
        let b = [Arch { major: 12, minor: 1 }];
        assert_eq!(render(Dialect::Flashinfer, &b, Some(&v("13.0.0"))).unwrap(), "12.1a");
    }
}
