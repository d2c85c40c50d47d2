//! A bare CUDA ELF: what `nvcc -cubin`, `ptxas` and the CuTe DSL write (`e_machine` `EM_CUDA`,
//! 190), one SASS image with no fatbin around it. The SM comes from `e_flags` (bits 8-15 from
//! ELF ABI version 8 on, the low byte before); `e_flags` is the same for `sm_120`, `sm_120a`
//! and `sm_120f`, so the variant comes from the `-arch sm_XY[a|f]` option that `ptxas` writes
//! into the `.note.nv.tkinfo` note. Without that note the image is read as plain SASS, the
//! weakest claim (a plain image never runs on more GPUs than an `a` or `f` one would).
//!
//! It deliberately ignores the kernels, symbols and relocations in the ELF.

use object::read::elf::{ElfFile64, FileHeader};
use object::{Endianness, Object, ObjectSection};

use super::image::{Compression, Image, ImageKind, Variant};
use super::{Fatbin, FatbinError};

/// `Some` when `data` is a 64-bit CUDA ELF: its one image, or why it cannot be read.
pub(super) fn bare(data: &[u8], name: &str) -> Option<Result<Vec<Fatbin>, FatbinError>> {
    let header = object::elf::FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    if header.e_machine(endian) != object::elf::EM_CUDA {
        return None;
    }
    let err = |message: String| FatbinError {
        path: name.to_string(),
        offset: None,
        message,
    };
    let file = match ElfFile64::<Endianness>::parse(data) {
        Ok(f) => f,
        Err(e) => return Some(Err(err(format!("a CUDA ELF whose sections cannot be read: {e}")))),
    };
    let flags = header.e_flags(endian).0;
    let abi = header.e_ident().abi_version;
    let sm = if abi >= 8 { (flags >> 8) & 0xff } else { flags & 0xff };
    let variant = file
        .section_by_name(".note.nv.tkinfo")
        .and_then(|s| s.data().ok())
        .and_then(|note| arch_option(note, sm))
        .unwrap_or(Variant::Plain);
    let image = Image {
        kind: ImageKind::Cubin,
        sm,
        variant,
        version: (0, u16::from(abi)),
        compression: Compression::None,
        offset: 0,
        concatenated: false,
        payload_at: 0,
        payload_len: data.len() as u64,
        uncompressed: 0,
        blob_range: None,
    };
    Some(Ok(vec![Fatbin {
        section: "cubin".into(),
        offset: 0,
        images: vec![image],
        unknown: Vec::new(),
    }]))
}

/// The variant in the `-arch sm_<sm>[a|f]` option recorded in the note, if it names `sm`.
fn arch_option(note: &[u8], sm: u32) -> Option<Variant> {
    let needle = format!("-arch sm_{sm}");
    let at = note.windows(needle.len()).position(|w| w == needle.as_bytes())?;
    match note.get(at + needle.len()) {
        Some(b'a') => Some(Variant::Arch),
        Some(b'f') => Some(Variant::Family),
        Some(b' ' | 0) | None => Some(Variant::Plain),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arch_option_gives_the_variant_only_for_the_sm_of_the_flags() {
        let note = b"\0ptxas\0Cuda compilation tools\0-arch sm_120a -m 64 \0";
        assert_eq!(arch_option(note, 120), Some(Variant::Arch));
        assert_eq!(arch_option(b"-arch sm_120f -m 64", 120), Some(Variant::Family));
        assert_eq!(arch_option(b"-arch sm_120 -m 64", 120), Some(Variant::Plain));
        assert_eq!(arch_option(b"-arch sm_120\0", 120), Some(Variant::Plain));
        // sm_1200 is not sm_120; another SM is not this one.
        assert_eq!(arch_option(b"-arch sm_1200", 120), None);
        assert_eq!(arch_option(b"-arch sm_90a", 120), None);
    }
}
