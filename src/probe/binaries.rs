//! The CUDA binaries a distribution installed: every shared object, relocatable object (`.o`),
//! static archive (`.a`) and bare cubin (`.cubin`) its `RECORD` lists, with the SASS and PTX their fatbins hold (read
//! by [`crate::fatbin`], headers only; an object's `-rdc` images count, see its docs).
//!
//! It also describes a file's loadable images in the arch vocabulary ([`kernel_images`]), so that
//! the run rules (`arch::run`) judge them without knowing the fatbin format.
//!
//! It deliberately ignores files outside the RECORD (caches a package writes at run time) and
//! does not judge the archs: `resolve::status` does, with the run rules.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::arch::run::{self, Code, KernelImage, RunsOn, Specific};
use crate::fatbin::{self, FileReport, ImageKind, Variant};
use crate::probe::python::Dist;

/// The shared objects of one distribution that hold CUDA code, and the ones that could not be read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Binaries {
    /// Files with at least one loadable kernel image.
    pub cuda: Vec<FileReport>,
    /// Shared objects without CUDA code.
    pub plain: usize,
    /// Files that could not be read, with the reason.
    pub unreadable: Vec<String>,
    /// The CUDA runtime major its binaries link (`libcudart.so.13` → 13), when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudart: Option<u64>,
}

/// Whether a path names a file that can hold device code: a shared object, an object, an
/// archive, or a bare cubin (flashinfer-cubin ships its kernels as `.cubin` files).
pub fn may_hold_cuda(path: &str) -> bool {
    path.ends_with(".so")
        || path.contains(".so.")
        || path.ends_with(".o")
        || path.ends_with(".a")
        || path.ends_with(".cubin")
}

/// Reads every `.so`, `.o`, `.a` and `.cubin` listed in the distribution's RECORD.
pub fn scan(dist: &Dist) -> Binaries {
    let mut out = Binaries::default();
    let (Some(info), Some(loc)) = (&dist.dist_info, &dist.location) else {
        return out;
    };
    let Ok(record) = std::fs::read_to_string(Path::new(info).join("RECORD")) else {
        return out;
    };
    for line in record.lines() {
        let Some(rel) = line.split(',').next() else { continue };
        if !may_hold_cuda(rel) {
            continue;
        }
        let path = Path::new(loc).join(rel.trim_matches('"'));
        if !path.is_file() {
            continue;
        }
        match fatbin::read_file(&path) {
            Ok(r) if r.images().next().is_some() => {
                if out.cudart.is_none() {
                    out.cudart = cudart_of_file(&path);
                }
                out.cuda.push(r)
            }
            Ok(_) => out.plain += 1,
            Err(e) => out.unreadable.push(e.to_string()),
        }
    }
    out
}

/// The major of the CUDA runtime an ELF shared object links (`DT_NEEDED libcudart.so.13` → 13);
/// `None` for a static runtime or no ELF.
pub fn cudart_major<'a, R: object::ReadRef<'a>>(data: R) -> Option<u64> {
    super::needed::needed(data)
        .iter()
        .find_map(|name| name.strip_prefix("libcudart.so.")?.split('.').next()?.parse().ok())
}

/// [`cudart_major`] of the file at `path`, memory-mapped (only its headers are touched).
fn cudart_of_file(path: &Path) -> Option<u64> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: read-only private map, as in `fatbin::read_file`.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    cudart_major(&map[..])
}

/// The images the CUDA runtime can load from `r` (not the relocatable `-rdc` inputs), as the
/// run rules describe them.
pub fn kernel_images(r: &FileReport) -> Vec<KernelImage> {
    r.images()
        .map(|img| KernelImage {
            code: match img.kind {
                ImageKind::Cubin => Code::Sass,
                ImageKind::Ptx => Code::Ptx,
            },
            sm: img.sm,
            specific: match img.variant {
                Variant::Plain => Specific::Plain,
                Variant::Arch => Specific::Arch,
                Variant::Family => Specific::Family,
            },
            ptx_isa: img.version,
        })
        .collect()
}

/// Whether a file holds an image that runs on `target` under a driver for CUDA `driver_cuda`.
pub fn runs_on(r: &FileReport, target: Arch, driver_cuda: Option<&semver::Version>) -> RunsOn {
    run::runs_on(&kernel_images(r), target, driver_cuda)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw fatbin of one entry, built byte by byte from the header layout the reader checks.
    fn fatbin_of(kind: u16, sm: u32, flags: u64, isa: (u16, u16)) -> FileReport {
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
        fatbin::read_bytes(&f, "t").unwrap()
    }

    #[test]
    fn fatbin_entries_become_kernel_images_with_their_kind_variant_and_isa() {
        let cases = [
            (2, 120, 0, (1, 8), "sm_120"),
            (2, 120, 0x10_0000, (1, 8), "sm_120a"),
            (2, 100, 0x20_0000, (1, 8), "sm_100f"),
            (1, 90, 0, (9, 5), "compute_90"),
            (1, 120, 0x20_0000, (8, 8), "compute_120f"),
        ];
        for (kind, sm, flags, isa, name) in cases {
            let r = fatbin_of(kind, sm, flags, isa);
            let images = kernel_images(&r);
            assert_eq!(images.len(), 1, "{name}");
            assert_eq!(images[0].name(), name);
            assert_eq!(images[0].name(), r.images().next().unwrap().name());
            assert_eq!(images[0].ptx_isa, isa);
        }
        let ptx = fatbin_of(1, 90, 0, (9, 5));
        let h200 = Arch { major: 9, minor: 0 };
        let r = runs_on(&ptx, h200, Some(&semver::Version::new(13, 0, 0)));
        assert!(!r.usable);
        assert_eq!(
            r.why,
            "9.0: only PTX newer than the driver: compute_90 (PTX ISA 9.5 > 9.0) (CUDA error 222)"
        );
    }
}
