//! The byte layout: where fatbins sit in a file, their headers, their entries. Offsets and
//! field meanings follow the sources named in the `fatbin` module's docs. It deliberately
//! ignores what the images mean (that is the run rules' job) and never trusts a size field
//! without checking it against the file.

use object::elf::{FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, SectionHeader};
use object::{Endianness, FileKind, ReadRef};

use super::image::{Compression, Image, ImageKind, Variant};
use super::reader::Reader;
use super::{Fatbin, FatbinError, UnknownEntry};

const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const KIND_PTX: u16 = 1;
const KIND_ELF: u16 = 2;
const KIND_CONCAT: u16 = 0x100;
const FLAG_LZ4: u64 = 0x2000;
const FLAG_ZSTD: u64 = 0x8000;
const FLAG_ARCH: u64 = 0x10_0000;
const FLAG_FAMILY: u64 = 0x20_0000;
const ENTRY_MIN: usize = 64;

fn align8(x: u64) -> u64 {
    x.saturating_add(7) & !7
}

/// The fatbins of a file, and whether it is relocatable (an ELF `ET_REL` object, or an archive
/// of them): an input to linking rather than what the runtime loads.
pub(super) struct Located {
    pub fatbins: Vec<Fatbin>,
    pub relocatable: bool,
}

/// Finds and walks every fatbin in `data`: a raw fatbin, an ELF file, or an `ar` archive of ELF
/// objects (each member's fatbins, at their offsets in the archive).
pub(super) fn locate<'a, R: ReadRef<'a>>(data: R, name: &str) -> Result<Located, FatbinError> {
    let r = Reader::new(data, name);
    if r.len >= 4 && r.u32(0)? == FATBIN_MAGIC {
        return Ok(Located {
            fatbins: walk_region(&r, "file", 0, r.len)?,
            relocatable: false,
        });
    }
    let bad = |m: String| FatbinError {
        path: name.to_string(),
        offset: None,
        message: m,
    };
    if let Ok(FileKind::Archive) = FileKind::parse(data) {
        let archive = object::read::archive::ArchiveFile::parse(data).map_err(|e| bad(format!("bad archive: {e}")))?;
        let mut fatbins = Vec::new();
        for member in archive.members() {
            let member = member.map_err(|e| bad(format!("bad archive member: {e}")))?;
            let (base, size) = member.file_range();
            let bytes = r.bytes(base, size)?;
            // Members that are not ELF objects (a symbol table, text) hold no device code.
            let Ok((sections, _)) = elf_sections(bytes, &bad) else {
                continue;
            };
            for (sec, off, len) in sections {
                let at = base.saturating_add(off);
                fatbins.extend(walk_region(&r, &sec, at, at.saturating_add(len))?);
            }
        }
        return Ok(Located {
            fatbins,
            relocatable: true,
        });
    }
    let (sections, relocatable) = elf_sections(data, &bad)?;
    let mut fatbins = Vec::new();
    for (sec, off, size) in sections {
        let end = off.saturating_add(size);
        if LARGE_DATA.contains(&sec.as_str()) {
            fatbins.extend(scan_region(&r, &sec, off, end)?);
        } else {
            fatbins.extend(walk_region(&r, &sec, off, end)?);
        }
    }
    Ok(Located { fatbins, relocatable })
}

/// The fatbin sections of an ELF file (offsets within `data`), and whether it is `ET_REL`. Only
/// the header, the section table and the section names are read (not the symbol tables), so a
/// file of which only those were kept reads the same.
#[allow(clippy::type_complexity)]
fn elf_sections<'a, R: ReadRef<'a>>(
    data: R,
    bad: &dyn Fn(String) -> FatbinError,
) -> Result<(Vec<(String, u64, u64)>, bool), FatbinError> {
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => sections_of::<FileHeader64<Endianness>, R>(data, bad),
        Ok(FileKind::Elf32) => sections_of::<FileHeader32<Endianness>, R>(data, bad),
        Ok(other) => Err(bad(format!("not an ELF file, an archive or a fatbin ({other:?})"))),
        Err(_) => Err(bad("not an ELF file, an archive or a fatbin".into())),
    }
}

#[allow(clippy::type_complexity)]
fn sections_of<'a, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'a>>(
    data: R,
    bad: &dyn Fn(String) -> FatbinError,
) -> Result<(Vec<(String, u64, u64)>, bool), FatbinError> {
    let header = Elf::parse(data).map_err(|e| bad(format!("bad ELF: {e}")))?;
    let endian = header.endian().map_err(|e| bad(format!("bad ELF: {e}")))?;
    let table = header
        .sections(endian, data)
        .map_err(|e| bad(format!("bad ELF: {e}")))?;
    let mut out = Vec::new();
    for section in table.iter() {
        let Some(name) = table
            .section_name(endian, section)
            .ok()
            .and_then(|n| std::str::from_utf8(n).ok())
        else {
            continue;
        };
        if name != ".nv_fatbin" && name != "__nv_relfatbin" && !LARGE_DATA.contains(&name) {
            continue;
        }
        if let Some((off, size)) = section.file_range(endian) {
            out.push((name.to_string(), off, size));
        }
    }
    Ok((out, header.e_type(endian) == object::elf::ET_REL))
}

/// The x86-64 large-data sections (`-mcmodel=medium`): a library too big for `.nv_fatbin` keeps
/// its fatbins there among other data (libcufft.so.12 of nvidia-cufft 12.2.0.57: 29,341 fatbins
/// in a 283 MB `.ldata`, its `.nv_fatbin` one sm_75 stub; cuobjdump lists only the stub), so
/// these are scanned by magic instead of walked end to end.
const LARGE_DATA: &[&str] = &[".ldata", ".lrodata"];

/// That the section `[start, end)` lies inside the file.
fn inside_file<'a, R: ReadRef<'a>>(
    r: &Reader<'a, '_, R>,
    section: &str,
    start: u64,
    end: u64,
) -> Result<(), FatbinError> {
    if end > r.len {
        return Err(r.err(start, format!("section {section} runs past the end of the file")));
    }
    Ok(())
}

/// The fatbins in `[start, end)` of a section that also holds other data: each 8-aligned fatbin
/// magic whose header (version 1, 16 bytes, a size inside the section) and entries read, taken
/// whole; anything else is skipped.
fn scan_region<'a, R: ReadRef<'a>>(
    r: &Reader<'a, '_, R>,
    section: &str,
    start: u64,
    end: u64,
) -> Result<Vec<Fatbin>, FatbinError> {
    inside_file(r, section, start, end)?;
    let mut out = Vec::new();
    let mut off = align8(start);
    while off + 16 <= end {
        let at = off;
        off += 8;
        // A position that was not kept (a sparse read keeps each magic it passed) holds none.
        let header = |at| Ok::<_, FatbinError>((r.u32(at)?, r.u16(at + 4)?, r.u16(at + 6)?));
        if !matches!(header(at), Ok((FATBIN_MAGIC, 1, 16))) {
            continue;
        }
        let fat_size = r.u64(at + 8)?;
        let Some(fat_end) = (at + 16).checked_add(fat_size).filter(|e| *e <= end) else {
            continue;
        };
        if let Ok((images, unknown)) = walk_entries(r, at + 16, fat_end) {
            out.push(Fatbin {
                section: section.to_string(),
                offset: at,
                images,
                unknown,
            });
            off = align8(fat_end).max(at + 16);
        }
    }
    Ok(out)
}

/// Walks the fatbins laid end to end in `[start, end)`.
fn walk_region<'a, R: ReadRef<'a>>(
    r: &Reader<'a, '_, R>,
    section: &str,
    start: u64,
    end: u64,
) -> Result<Vec<Fatbin>, FatbinError> {
    inside_file(r, section, start, end)?;
    let mut out = Vec::new();
    let mut off = start;
    while off < end {
        if end - off < 16 {
            if r.bytes(off, end - off)?.iter().all(|&b| b == 0) {
                break;
            }
            return Err(r.err(off, "truncated fatbin header"));
        }
        let magic = r.u32(off)?;
        if magic != FATBIN_MAGIC {
            // Zero padding between fatbins.
            if r.u64(off)? == 0 {
                off += 8;
                continue;
            }
            return Err(r.err(off, format!("bad fatbin magic {magic:#010x} (want 0xba55ed50)")));
        }
        let header = u64::from(r.u16(off + 6)?);
        let fat_size = r.u64(off + 8)?;
        if header < 16 {
            return Err(r.err(off, format!("fatbin header size {header} is below 16")));
        }
        let body = off.checked_add(header).ok_or_else(|| r.err(off, "size overflows"))?;
        let fat_end = body
            .checked_add(fat_size)
            .ok_or_else(|| r.err(off, "fatbin size overflows"))?;
        if fat_end > end {
            return Err(r.err(
                off,
                format!("fatbin of {fat_size} bytes runs past the end of {section}"),
            ));
        }
        let (images, unknown) = walk_entries(r, body, fat_end)?;
        out.push(Fatbin {
            section: section.to_string(),
            offset: off,
            images,
            unknown,
        });
        off = align8(fat_end).max(off + 16);
    }
    Ok(out)
}

struct EntryHeader {
    kind: u16,
    header_size: u64,
    payload_size: u64,
    compressed_size: u64,
    options_offset: u64,
    minor: u16,
    major: u16,
    arch: u32,
    flags: u64,
    uncompressed: u64,
}

fn entry_header<'a, R: ReadRef<'a>>(r: &Reader<'a, '_, R>, e: u64) -> Result<EntryHeader, FatbinError> {
    r.bytes(e, ENTRY_MIN as u64)?;
    Ok(EntryHeader {
        kind: r.u16(e)?,
        header_size: u64::from(r.u32(e + 4)?),
        payload_size: r.u64(e + 8)?,
        compressed_size: u64::from(r.u32(e + 0x10)?),
        options_offset: u64::from(r.u32(e + 0x14)?),
        minor: r.u16(e + 0x18)?,
        major: r.u16(e + 0x1a)?,
        arch: r.u32(e + 0x1c)?,
        flags: r.u64(e + 0x28)?,
        uncompressed: r.u64(e + 0x38)?,
    })
}

fn variant(flags: u64) -> Variant {
    if flags & FLAG_FAMILY != 0 {
        Variant::Family
    } else if flags & FLAG_ARCH != 0 {
        Variant::Arch
    } else {
        Variant::Plain
    }
}

fn compression(flags: u64) -> Compression {
    if flags & FLAG_ZSTD != 0 {
        Compression::Zstd
    } else if flags & FLAG_LZ4 != 0 {
        Compression::Lz4
    } else {
        Compression::None
    }
}

fn walk_entries<'a, R: ReadRef<'a>>(
    r: &Reader<'a, '_, R>,
    start: u64,
    end: u64,
) -> Result<(Vec<Image>, Vec<UnknownEntry>), FatbinError> {
    let mut images = Vec::new();
    let mut unknown = Vec::new();
    let mut e = start;
    while e < end {
        if end - e < ENTRY_MIN as u64 {
            return Err(r.err(e, "truncated fatbin entry header"));
        }
        let h = entry_header(r, e)?;
        if h.header_size < ENTRY_MIN as u64 {
            return Err(r.err(e, format!("entry header size {} is below 64", h.header_size)));
        }
        let payload_at = e.checked_add(h.header_size).ok_or_else(|| r.err(e, "size overflows"))?;
        let next = payload_at
            .checked_add(h.payload_size)
            .ok_or_else(|| r.err(e, "entry size overflows"))?;
        if next > end {
            return Err(r.err(
                e,
                format!("entry of {} bytes runs past the end of its fatbin", h.payload_size),
            ));
        }
        let image = |kind, arch, flags, version, concatenated, blob_range| Image {
            kind,
            sm: arch,
            variant: variant(flags),
            version,
            compression: compression(h.flags),
            offset: e,
            concatenated,
            payload_at,
            payload_len: if h.compressed_size > 0 {
                h.compressed_size.min(h.payload_size)
            } else {
                h.payload_size
            },
            uncompressed: h.uncompressed,
            blob_range,
        };
        match h.kind {
            KIND_PTX => images.push(image(ImageKind::Ptx, h.arch, h.flags, (h.major, h.minor), false, None)),
            KIND_ELF => images.push(image(
                ImageKind::Cubin,
                h.arch,
                h.flags,
                (h.major, h.minor),
                false,
                None,
            )),
            KIND_CONCAT => {
                for sub in concatenated(r, e, &h)? {
                    let kind = if sub.kind == KIND_PTX {
                        ImageKind::Ptx
                    } else {
                        ImageKind::Cubin
                    };
                    images.push(image(
                        kind,
                        sub.arch,
                        sub.flags,
                        (sub.major, sub.minor),
                        true,
                        Some((sub.at, sub.size)),
                    ));
                }
            }
            kind => unknown.push(UnknownEntry { offset: e, kind }),
        }
        e = next;
    }
    Ok((images, unknown))
}

struct SubEntry {
    kind: u16,
    arch: u32,
    flags: u64,
    major: u16,
    minor: u16,
    at: u64,
    size: u64,
}

/// The sub-entry headers of a concatenated entry (kind 0x100, written by CUDA 13.x
/// `nvcc --concat`; `cuobjdump` prints it as "Fatbin concatenated entry"): at +0x40 `u32 count`,
/// `u32 table_len`, then `count` entry headers whose @+4 is the offset inside the blob.
fn concatenated<'a, R: ReadRef<'a>>(
    r: &Reader<'a, '_, R>,
    e: u64,
    h: &EntryHeader,
) -> Result<Vec<SubEntry>, FatbinError> {
    let header_end = e + h.header_size;
    if h.header_size < 0x48 + ENTRY_MIN as u64 {
        return Err(r.err(e, "concatenated entry too short for its table"));
    }
    let count = u64::from(r.u32(e + 0x40)?);
    if count == 0 || count > h.header_size / ENTRY_MIN as u64 {
        return Err(r.err(e + 0x40, format!("concatenated entry claims {count} images")));
    }
    let mut subs = Vec::new();
    let mut s = e + 0x48;
    for _ in 0..count {
        if s + ENTRY_MIN as u64 > header_end {
            return Err(r.err(s, "concatenated entry table is truncated"));
        }
        let sh = entry_header(r, s)?;
        if sh.kind != KIND_ELF && sh.kind != KIND_PTX {
            return Err(r.err(
                s,
                format!("unknown image kind {:#x} inside a concatenated entry", sh.kind),
            ));
        }
        subs.push(SubEntry {
            kind: sh.kind,
            arch: sh.arch,
            flags: sh.flags,
            major: sh.major,
            minor: sh.minor,
            at: u64::from(r.u32(s + 4)?),
            size: r.u64(s + 8)?,
        });
        // The sub-entry ends after its options blob, padded to 8 (as CUDA 13.x writes it). Fall back to
        // scanning for the next `02 00 01 01` / `01 00 01 01` header at 8-byte steps.
        let mut next = s + ENTRY_MIN as u64;
        if sh.options_offset >= ENTRY_MIN as u64 && s + sh.options_offset + 8 <= header_end {
            let o = u64::from(r.u32(s + sh.options_offset)?);
            let l = u64::from(r.u32(s + sh.options_offset + 4)?);
            next = align8(s + o + l + 1);
        }
        if subs.len() < count as usize {
            let looks_like_header = |at: u64| {
                at + 4 <= header_end && r.bytes(at, 4).is_ok_and(|b| (b == [2, 0, 1, 1]) || (b == [1, 0, 1, 1]))
            };
            if !looks_like_header(next) {
                let mut probe = s + ENTRY_MIN as u64;
                while probe + 4 <= header_end && !looks_like_header(probe) {
                    probe += 8;
                }
                next = probe;
            }
        }
        s = next;
    }
    Ok(subs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_fatbins_and_padding_between_fatbins() {
        // An empty fatbin (fat_size 0, as nvcc's dlink stub is for PTX-only builds), 8 bytes of
        // zero padding, then a fatbin with one PTX entry for compute_120 (ISA 9.0).
        let mut data = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        data.extend([0u8; 8]);
        let mut e = vec![0u8; 64];
        e[0] = 1;
        e[4] = 64;
        e[0x18] = 0;
        e[0x1a] = 9;
        e[0x1c] = 120;
        e[0x28] = 0x11;
        let mut f = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0];
        f.extend((e.len() as u64).to_le_bytes());
        f.extend(e);
        data.extend(f);
        let fatbins = locate(&data[..], "t").unwrap().fatbins;
        assert_eq!(fatbins.len(), 2);
        assert!(fatbins[0].images.is_empty());
        assert_eq!(fatbins[1].images[0].name(), "compute_120");
        assert_eq!(fatbins[1].images[0].ptx_isa().as_deref(), Some("9.0"));
    }
}
