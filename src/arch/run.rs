//! Run rules: can a kernel image run on a device of a given compute capability, under a driver
//! that supports a given CUDA version? (NVIDIA's Blackwell compatibility guide,
//! <https://docs.nvidia.com/cuda/blackwell-compatibility-guide/>, and the family-specific
//! targets of CUDA 12.9,
//! <https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features/>.)
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
//! "an image runs here" is the claim, and smoke tests prove the rest.

use serde::Serialize;

use super::Arch;
use crate::fatbin::{FileReport, Image, ImageKind, Variant};

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
/// history, <https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes>):
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
pub fn verdict(img: &Image, device: Arch, driver_cuda: Option<&semver::Version>) -> Verdict {
    let (x, y) = (img.sm / 10, img.sm % 10);
    let (m_major, m_minor) = (device.major, device.minor);
    let arch_ok = match (img.kind, img.variant) {
        (_, Variant::Arch) => m_major == x && m_minor == y,
        (_, Variant::Family) | (ImageKind::Cubin, Variant::Plain) => m_major == x && m_minor >= y,
        (ImageKind::Ptx, Variant::Plain) => (m_major, m_minor) >= (x, y),
    };
    if !arch_ok {
        return Verdict::NoBinary;
    }
    if img.kind == ImageKind::Cubin {
        return Verdict::Runs;
    }
    if let Some(max) = driver_cuda.and_then(|d| max_ptx_isa(d.major, d.minor))
        && img.version > max
    {
        return Verdict::PtxTooNew {
            isa: format!("{}.{}", img.version.0, img.version.1),
            driver_max: format!("{}.{}", max.0, max.1),
        };
    }
    Verdict::Jit
}

/// Whether one file can run on one arch, and why.
#[derive(Debug, Serialize)]
pub struct RunsOn {
    pub arch: String,
    pub usable: bool,
    /// The images that would load (SASS first), or why none does.
    pub images: Vec<String>,
    pub why: String,
}

/// Judges a file's loadable images for one device arch.
pub fn runs_on(r: &FileReport, target: Arch, driver_cuda: Option<&semver::Version>) -> RunsOn {
    let mut usable = Vec::new();
    let mut too_new = Vec::new();
    for img in r.images() {
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
    let why = if !usable.is_empty() {
        format!("{target}: loads {}", usable.join(", "))
    } else if !too_new.is_empty() {
        format!(
            "{target}: only PTX newer than the driver: {} (CUDA error 222)",
            too_new.join(", ")
        )
    } else {
        let mut held: Vec<String> = r.sass.clone();
        held.extend(r.ptx.iter().cloned());
        format!(
            "{target}: no usable image (holds {}; CUDA error 209, no kernel image)",
            if held.is_empty() {
                "none".into()
            } else {
                held.join(", ")
            }
        )
    };
    RunsOn {
        arch: target.to_string(),
        usable: !usable.is_empty(),
        images: usable,
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fatbin::read_bytes;

    /// A one-entry fatbin built byte by byte, headers as in the `fatbin` module's sources.
    fn one(kind: u16, sm: u32, flags: u64, isa: (u16, u16)) -> Image {
        let mut e = vec![0u8; 64];
        e[0..2].copy_from_slice(&kind.to_le_bytes());
        e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&8u64.to_le_bytes());
        e[0x18..0x1a].copy_from_slice(&isa.1.to_le_bytes());
        e[0x1a..0x1c].copy_from_slice(&isa.0.to_le_bytes());
        e[0x1c..0x20].copy_from_slice(&sm.to_le_bytes());
        e[0x28..0x30].copy_from_slice(&(0x11 | flags).to_le_bytes());
        e.extend([0u8; 8]);
        let mut f = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0];
        f.extend((e.len() as u64).to_le_bytes());
        f.extend(e);
        read_bytes(&f, "t").unwrap().fatbins[0].images[0].clone()
    }

    const A: u64 = 0x10_0000;
    const F: u64 = 0x20_0000;

    #[test]
    fn sm120_table_from_fatbin_md_section_9() {
        let dev = Arch { major: 12, minor: 0 };
        let spark = Arch { major: 12, minor: 1 };
        let cases = [
            (one(2, 120, 0, (1, 8)), true, true),
            (one(2, 120, A, (1, 8)), true, false),
            (one(2, 120, F, (1, 8)), true, true),
            (one(2, 121, 0, (1, 8)), false, true),
            (one(2, 100, F, (1, 8)), false, false),
            (one(2, 90, 0, (1, 8)), false, false),
            (one(1, 90, 0, (8, 8)), true, true),
            (one(1, 120, A, (8, 8)), true, false),
            (one(1, 120, F, (8, 8)), true, true),
            (one(1, 100, F, (8, 8)), false, false),
            (one(1, 121, 0, (8, 8)), false, true),
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
        let ptx95 = one(1, 90, 0, (9, 5));
        assert_eq!(
            verdict(&ptx95, h200, Some(&driver)),
            Verdict::PtxTooNew {
                isa: "9.5".into(),
                driver_max: "9.0".into()
            }
        );
        assert_eq!(verdict(&one(1, 90, 0, (8, 8)), h200, Some(&driver)), Verdict::Jit);
        assert_eq!(verdict(&one(1, 120, 0, (8, 8)), h200, Some(&driver)), Verdict::NoBinary);
        assert_eq!(verdict(&one(2, 90, A, (1, 8)), h200, Some(&driver)), Verdict::Runs);
        assert_eq!(verdict(&one(2, 80, 0, (1, 8)), h200, Some(&driver)), Verdict::NoBinary);
    }
}
