//! Run rules: can a kernel image run on a device of a given compute capability, under a driver
//! that supports a given CUDA version? (NVIDIA's CUDA C++ Programming Guide, "Binary
//! Compatibility" and "PTX Compatibility"; the Blackwell Compatibility Guide,
//! <https://docs.nvidia.com/cuda/blackwell-compatibility-guide/>.)
//!
//! | image            | runs on device M.m when |
//! |------------------|-------------------------|
//! | cubin `sm_XY`    | M == X and m >= Y |
//! | cubin `sm_XYa`   | M.m == X.Y |
//! | cubin `sm_XYf`   | M == X and m >= Y |
//! | PTX `compute_XY` | M.m >= X.Y (JIT, across majors), and the PTX ISA is one the driver knows |
//! | PTX `compute_XYa`| M.m == X.Y, and the ISA condition |
//! | PTX `compute_XYf`| M == X and m >= Y, and the ISA condition |
//!
//! A PTX image whose ISA is newer than the driver fails with CUDA error 222
//! (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`), not 209 (`CUDA_ERROR_NO_BINARY_FOR_GPU`).
//! It deliberately ignores what a kernel needs besides an image (shared memory, registers):
//! "an image runs here" is the claim, and smoke tests prove the rest. It also ignores how images
//! are stored in binaries: readers describe them as [`KernelImage`]s.

use serde::Serialize;

use super::Arch;

/// What a kernel image is, in the arch vocabulary: machine code for one arch, or PTX that the
/// driver compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// SASS (a cubin): `sm_XY`.
    Sass,
    /// PTX: `compute_XY`.
    Ptx,
}

/// Plain, arch-specific (`a`) or family-specific (`f`) code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Specific {
    Plain,
    Arch,
    Family,
}

/// One kernel image as the run rules see it. Readers of binary formats (the fatbin reader)
/// describe their images this way; these rules know nothing of how images are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelImage {
    pub code: Code,
    /// The SM number without suffix: 120 for `sm_120a`.
    pub sm: u32,
    pub specific: Specific,
    /// The PTX ISA version (`(9, 5)`); ignored for SASS.
    pub ptx_isa: (u16, u16),
}

impl KernelImage {
    /// `sm_120a` or `compute_120f`.
    pub fn name(&self) -> String {
        let prefix = match self.code {
            Code::Sass => "sm",
            Code::Ptx => "compute",
        };
        let suffix = match self.specific {
            Specific::Plain => "",
            Specific::Arch => "a",
            Specific::Family => "f",
        };
        format!("{prefix}_{}{suffix}", self.sm)
    }
}

/// The verdict for one image on one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict")]
pub enum Verdict {
    /// The driver loads this SASS directly.
    Runs,
    /// The driver JIT-compiles this PTX.
    Jit,
    /// Not for this device: CUDA error 209, "no kernel image is available".
    NoBinary,
    /// PTX for this device, but newer than the driver: CUDA error 222.
    PtxTooNew { isa: String, driver_max: String },
}

impl Verdict {
    pub fn usable(&self) -> bool {
        matches!(self, Verdict::Runs | Verdict::Jit)
    }
}

/// The newest PTX ISA a driver supporting CUDA `major.minor` can JIT (the PTX ISA release
/// notes, <https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes>):
/// 12.0→8.0 … 12.4→8.4, 12.5/12.6→8.5, 12.8→8.7, 12.9→8.8, 13.x→9.x.
pub fn max_ptx_isa(cuda_major: u64, cuda_minor: u64) -> Option<(u16, u16)> {
    Some(match (cuda_major, cuda_minor) {
        (12, m @ 0..=4) => (8, m as u16),
        (12, 5 | 6) => (8, 5),
        (12, 7) => (8, 6),
        (12, 8) => (8, 7),
        (12, _) => (8, 8),
        (13, m) => (9, m.min(99) as u16),
        (m, _) if m > 13 => (u16::MAX, 0),
        _ => return None,
    })
}

/// Can `img` run on a device of `device` capability, under a driver for CUDA `driver_cuda`
/// (when known; unknown skips the ISA check)?
pub fn verdict(img: &KernelImage, device: Arch, driver_cuda: Option<&semver::Version>) -> Verdict {
    let (x, y) = (img.sm / 10, img.sm % 10);
    let (m_major, m_minor) = (device.major, device.minor);
    let arch_ok = match (img.code, img.specific) {
        (_, Specific::Arch) => m_major == x && m_minor == y,
        (_, Specific::Family) | (Code::Sass, Specific::Plain) => m_major == x && m_minor >= y,
        (Code::Ptx, Specific::Plain) => (m_major, m_minor) >= (x, y),
    };
    if !arch_ok {
        return Verdict::NoBinary;
    }
    if img.code == Code::Sass {
        return Verdict::Runs;
    }
    if let Some(max) = driver_cuda.and_then(|d| max_ptx_isa(d.major, d.minor))
        && img.ptx_isa > max
    {
        return Verdict::PtxTooNew {
            isa: format!("{}.{}", img.ptx_isa.0, img.ptx_isa.1),
            driver_max: format!("{}.{}", max.0, max.1),
        };
    }
    Verdict::Jit
}

/// Whether one file can run on one arch, and why.
#[derive(Debug, Serialize)]
pub struct RunsOn {
    pub arch: Arch,
    pub usable: bool,
    /// The images that would load (SASS first), or why none does.
    pub images: Vec<String>,
    /// `{arch}: {because}`.
    pub why: String,
    /// The verdict's words without the arch ("no usable image (holds sm_90a; ...)").
    #[serde(skip)]
    pub because: String,
}

/// Judges a file's loadable images for one device arch.
pub fn runs_on(images: &[KernelImage], target: Arch, driver_cuda: Option<&semver::Version>) -> RunsOn {
    let mut usable = Vec::new();
    let mut too_new = Vec::new();
    for img in images {
        match verdict(img, target, driver_cuda) {
            Verdict::Runs | Verdict::Jit => {
                let n = img.name();
                if !usable.contains(&n) {
                    usable.push(n);
                }
            }
            Verdict::PtxTooNew { isa, driver_max } => {
                too_new.push(format!("{} (PTX ISA {isa} > {driver_max})", img.name()))
            }
            Verdict::NoBinary => {}
        }
    }
    let because = if !usable.is_empty() {
        format!("loads {}", usable.join(", "))
    } else if !too_new.is_empty() {
        format!(
            "only PTX newer than the driver: {} (CUDA error 222)",
            too_new.join(", ")
        )
    } else {
        format!(
            "no usable image (holds {}; CUDA error 209, no kernel image)",
            held(images).unwrap_or_else(|| "none".into())
        )
    };
    RunsOn {
        arch: target,
        usable: !usable.is_empty(),
        images: usable,
        why: format!("{target}: {because}"),
        because,
    }
}

/// The distinct image names, SASS first, each kind in SM order: `sm_90, sm_120a, compute_120f`.
fn held(images: &[KernelImage]) -> Option<String> {
    let mut names: Vec<(bool, u32, String)> = Vec::new();
    for img in images {
        let n = (img.code == Code::Ptx, img.sm, img.name());
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names.sort();
    let names: Vec<String> = names.into_iter().map(|(_, _, n)| n).collect();
    (!names.is_empty()).then(|| names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(code: Code, sm: u32, specific: Specific, ptx_isa: (u16, u16)) -> KernelImage {
        KernelImage {
            code,
            sm,
            specific,
            ptx_isa,
        }
    }

    use Code::{Ptx, Sass};
    use Specific::{Arch as A, Family as F, Plain};

    #[test]
    fn sm120_table_from_the_blackwell_compatibility_guide() {
        let dev = Arch { major: 12, minor: 0 };
        let spark = Arch { major: 12, minor: 1 };
        let cases = [
            (one(Sass, 120, Plain, (1, 8)), true, true),
            (one(Sass, 120, A, (1, 8)), true, false),
            (one(Sass, 120, F, (1, 8)), true, true),
            (one(Sass, 121, Plain, (1, 8)), false, true),
            (one(Sass, 100, F, (1, 8)), false, false),
            (one(Sass, 90, Plain, (1, 8)), false, false),
            (one(Ptx, 90, Plain, (8, 8)), true, true),
            (one(Ptx, 120, A, (8, 8)), true, false),
            (one(Ptx, 120, F, (8, 8)), true, true),
            (one(Ptx, 100, F, (8, 8)), false, false),
            (one(Ptx, 121, Plain, (8, 8)), false, true),
        ];
        for (img, on_120, on_121) in cases {
            assert_eq!(verdict(&img, dev, None).usable(), on_120, "{} on 12.0", img.name());
            assert_eq!(verdict(&img, spark, None).usable(), on_121, "{} on 12.1", img.name());
        }
    }

    #[test]
    fn ptx_newer_than_the_driver_is_error_222_not_209() {
        let h200 = Arch { major: 9, minor: 0 };
        let driver = semver::Version::new(13, 0, 0);
        let ptx95 = one(Ptx, 90, Plain, (9, 5));
        assert_eq!(
            verdict(&ptx95, h200, Some(&driver)),
            Verdict::PtxTooNew {
                isa: "9.5".into(),
                driver_max: "9.0".into()
            }
        );
        assert_eq!(verdict(&one(Ptx, 90, Plain, (8, 8)), h200, Some(&driver)), Verdict::Jit);
        assert_eq!(
            verdict(&one(Ptx, 120, Plain, (8, 8)), h200, Some(&driver)),
            Verdict::NoBinary
        );
        assert_eq!(verdict(&one(Sass, 90, A, (1, 8)), h200, Some(&driver)), Verdict::Runs);
        assert_eq!(
            verdict(&one(Sass, 80, Plain, (1, 8)), h200, Some(&driver)),
            Verdict::NoBinary
        );
    }

    #[test]
    fn a_file_without_a_usable_image_names_what_it_holds() {
        let images = [
            one(Ptx, 120, A, (9, 5)),
            one(Sass, 120, A, (1, 8)),
            one(Sass, 100, F, (1, 8)),
        ];
        let r = runs_on(&images, Arch { major: 9, minor: 0 }, None);
        assert!(!r.usable);
        assert_eq!(
            r.why,
            "9.0: no usable image (holds sm_100f, sm_120a, compute_120a; CUDA error 209, no kernel image)"
        );
        let r = runs_on(&images, Arch { major: 12, minor: 0 }, None);
        assert_eq!(r.images, ["compute_120a", "sm_120a"]);
    }
}
