//! A reader for CUDA fatbinaries: which SASS (`sm_120a`) and PTX (`compute_120f`, with its ISA
//! version) a host ELF object, shared library, raw `.fatbin` file or bare `.cubin` holds.
//!
//! NVIDIA does not document the format. The section names are those of CUDA's
//! `include/fatbinary_section.h`; the headers follow the open readers
//! (n-eiling/cuda-fatbin-decompression `fatbin-decompress.h:13-38` at 9b194a9, jiegec/fatbinary
//! `fatbinary/src/lib.rs:57` and `:96` at 7856d02, vosen/ZLUDA `cuda_types/src/dark_api.rs:40-80`
//! at 8a7931b). What none of them decodes (the `a`/`f` flag bits, `--concat` entries) was read
//! from files NVIDIA's CUDA 13 compiler writes, and the reader is checked against NVIDIA's
//! `cuobjdump` on such files (`tests/it/fatbin.rs`).
//!
//! The reader reads headers only: the file is memory-mapped and only the section table and the
//! fatbin and entry headers are touched, so a 500 MB library costs a few page faults. A file
//! that is only a stream (a member of a wheel) is read the same way from what [`sparse`] kept. Every
//! offset and size read from the file is checked before use; malformed input gives an error
//! naming the file and the offset, never a panic. Payloads are decompressed (LZ4 block, zstd
//! frame) only on request ([`payload`]), with the output size bounded.
//!
//! Relocatable device code (`nvcc -rdc=true`) sits in `__nv_relfatbin`
//! (`FATBIN_PRELINK_DATA_SECTION_NAME` in CUDA's `include/fatbinary_section.h`): cubins of ELF
//! type `ET_REL`, input to device linking. What they count for depends on the file that holds
//! them. In a linked binary (a shared library, an executable) the runtime loads the device-linked
//! image in `.nv_fatbin` and never the relocatable copies left beside it, so they are listed but
//! do not count. In a relocatable object (an ELF `ET_REL` `.o`, or an `ar` archive of them, as
//! wheels ship for device linking) they are what the object holds: device linking turns exactly
//! those cubins into the loadable image of whatever links it, so they are its images, and the
//! report says the file is relocatable. NVIDIA's `cuobjdump` lists them the same way for a `.o`
//! (`tests/it/fatbin.rs` compares the two).
//!
//! It deliberately ignores what the kernels are (names, registers) and whether they can run on a
//! device (that is `arch::run`).

mod cubin;
mod image;
mod layout;
mod payload;
mod reader;
pub mod sparse;

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use image::{Compression, Image, ImageKind, Variant};
pub use payload::{PayloadError, payload};

/// One fatbin (one translation unit, or nvcc's device-link stub).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fatbin {
    /// Where it was found: `.nv_fatbin`, `__nv_relfatbin`, or `file` for a raw fatbin.
    pub section: String,
    /// File offset of its header.
    pub offset: u64,
    pub images: Vec<Image>,
    /// Entries of a kind this reader does not know, by file offset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<UnknownEntry>,
}

impl Fatbin {
    /// Whether the runtime loads it from a linked binary as it is: `__nv_relfatbin` holds
    /// relocatable cubins from `-rdc`, input to device linking only.
    pub fn loadable(&self) -> bool {
        self.section != "__nv_relfatbin"
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnknownEntry {
    pub offset: u64,
    pub kind: u16,
}

/// What one file holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileReport {
    pub path: String,
    /// Distinct SASS targets it holds, sorted: `sm_90`, `sm_120a`, ... (see [`FileReport::images`]).
    pub sass: Vec<String>,
    /// Distinct PTX targets, sorted: `compute_120f`, ...
    pub ptx: Vec<String>,
    pub fatbins: Vec<Fatbin>,
    /// A relocatable object (ELF `ET_REL`, or an archive of them): its `-rdc` images count, and
    /// they load once device-linked into a binary.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relocatable: bool,
}

impl FileReport {
    fn new(path: &str, fatbins: Vec<Fatbin>, relocatable: bool) -> FileReport {
        let mut sass: Vec<(u32, String)> = Vec::new();
        let mut ptx: Vec<(u32, String)> = Vec::new();
        let counted = fatbins.iter().filter(|f| relocatable || f.loadable());
        for img in counted.flat_map(|f| f.images.iter()) {
            let list = match img.kind {
                ImageKind::Cubin => &mut sass,
                ImageKind::Ptx => &mut ptx,
            };
            let name = img.name();
            if !list.iter().any(|(_, n)| *n == name) {
                list.push((img.sm, name));
            }
        }
        sass.sort();
        ptx.sort();
        FileReport {
            path: path.to_string(),
            sass: sass.into_iter().map(|(_, n)| n).collect(),
            ptx: ptx.into_iter().map(|(_, n)| n).collect(),
            fatbins,
            relocatable,
        }
    }

    /// Every image the run rules judge: what the CUDA runtime loads from a linked binary (not
    /// the relocatable `-rdc` copies), or, for a relocatable object, every image it holds (its
    /// `-rdc` ones load once device-linked).
    pub fn images(&self) -> impl Iterator<Item = &Image> {
        self.fatbins
            .iter()
            .filter(|f| self.relocatable || f.loadable())
            .flat_map(|f| f.images.iter())
    }

    /// Every image, relocatable `-rdc` inputs included.
    pub fn all_images(&self) -> impl Iterator<Item = &Image> {
        self.fatbins.iter().flat_map(|f| f.images.iter())
    }
}

/// Why a file could not be read.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{path}: {message}{}", offset.map(|o| format!(" (at offset {o:#x})")).unwrap_or_default())]
pub struct FatbinError {
    pub path: String,
    pub offset: Option<u64>,
    pub message: String,
}

/// Reads the fatbins of the file at `path`.
pub fn read_file(path: &Path) -> Result<FileReport, FatbinError> {
    let name = path.display().to_string();
    let err = |m: String| FatbinError {
        path: name.clone(),
        offset: None,
        message: m,
    };
    // Opened without blocking: a fifo answers at once (and is refused below), never waits.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| err(format!("cannot open: {e}")))?;
    let meta = file.metadata().map_err(|e| err(format!("cannot stat: {e}")))?;
    if meta.is_dir() {
        return Err(err("is a directory; name the files inside it".into()));
    }
    if !meta.is_file() {
        return Err(err(
            "is not a regular file (a fifo, a device or a socket); name a file".into()
        ));
    }
    let len = meta.len();
    if len == 0 {
        return Err(err("empty file".into()));
    }
    // SAFETY: the map is read-only and private to this call; a file truncated underneath us
    // could fault, which is the accepted risk of every mmap-based reader (ripgrep, object).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| err(format!("cannot map: {e}")))?;
    read_bytes(&map, &name)
}

/// Reads the fatbins in `data` (an ELF file or a raw fatbin), naming it `name` in errors.
pub fn read_bytes(data: &[u8], name: &str) -> Result<FileReport, FatbinError> {
    if let Some(bare) = cubin::bare(data, name) {
        return Ok(FileReport::new(name, bare?, false));
    }
    let found = layout::locate(data, name)?;
    Ok(FileReport::new(name, found.fatbins, found.relocatable))
}

/// Reads the fatbins of an ELF file of which only the headers were kept ([`sparse::capture`]):
/// the same report as [`read_bytes`] of the whole file.
pub fn read_sparse(data: &sparse::Sparse, name: &str) -> Result<FileReport, FatbinError> {
    let found = layout::locate(data, name)?;
    Ok(FileReport::new(name, found.fatbins, found.relocatable))
}

/// A raw fatbin holding one SASS image for `sm` with variant `flags` (0, `a` = 0x20_0000,
/// `f` = 0x10_0000), read back: the smallest real input for tests of what images mean.
#[cfg(test)]
pub(crate) fn test_sass(sm: u32, flags: u64) -> FileReport {
    let mut e = vec![0u8; 64];
    e[0..2].copy_from_slice(&2u16.to_le_bytes());
    e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
    e[4..8].copy_from_slice(&64u32.to_le_bytes());
    e[8..16].copy_from_slice(&8u64.to_le_bytes());
    e[0x1c..0x20].copy_from_slice(&sm.to_le_bytes());
    e[0x28..0x30].copy_from_slice(&(0x11 | flags).to_le_bytes());
    e.extend([0u8; 8]);
    let mut f = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0];
    f.extend((e.len() as u64).to_le_bytes());
    f.extend(e);
    read_bytes(&f, "t").unwrap()
}
