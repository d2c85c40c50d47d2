//! A file read as a stream, keeping only what the fatbin reader and the ELF dynamic-section
//! readers look at: the ELF header, the section header table, the section names, `.dynamic` and
//! its string table, and inside each section that may hold fatbins the fatbin and entry headers
//! (payloads are streamed past, never kept). A 1 GB shared object inside a wheel is judged from
//! about 20 MiB this way, without unpacking it to disk or memory.
//!
//! One pass over the stream usually does: it keeps the file's first 16 MiB whole (the ELF and
//! program headers, `.dynsym`, `.dynstr`), the `.dynamic` the program headers place, the 4 MiB
//! before the section table whole (the section names, which linkers write last), the section
//! table itself (at `e_shoff`, known from the header), and between them every fatbin found by
//! its magic at an 8-aligned position, with its entry headers and the zero padding after it.
//! Which sections are `.nv_fatbin` is known only once the names are read, at the end, so the
//! caller then checks that what was kept suffices ([`Capture::sufficient`]: every section the
//! readers need whole is there, and the fatbin reader read every header it looked for); where it
//! does not, a second pass keeps exactly what the section table names (each `SHT_PROGBITS`
//! section walked as fatbins laid end to end, then scanned by magic from the first byte that is
//! not one). A read of bytes not kept fails, so a first pass either gives what a whole read
//! gives or is not used, with one exception: `layout` scans the large-data sections by magic and
//! takes a position not kept for one without a fatbin, and the first pass skips the positions
//! inside each fatbin it walked, as `layout` does, even one that runs past its section's end.
//! Scanning costs a compare per 8 bytes streamed; decompression costs far more.
//!
//! What it keeps is a [`Sparse`], which `object`'s readers and `layout` read through
//! [`ReadRef`]; a read of anything not kept fails as a truncated file would. Only 64-bit
//! little-endian ELF files are read so ([`SparseError::NotElf64`] for anything else: the caller
//! reads those whole). It deliberately ignores what the bytes mean: `layout` and `probe::needed`
//! decide that, with the same checks as for a file read whole.

mod stream;
mod walk;

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Range;

use object::elf::{self, FileHeader64, ProgramHeader64, SectionHeader64};
use object::{LittleEndian, ReadRef, pod};
use stream::Stream;
use walk::{scan, walk};

const LE: LittleEndian = LittleEndian;
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// The most of one whole section kept (names, `.dynamic`, `.dynstr`).
const MAX_WHOLE: u64 = 16 << 20;
/// Zero padding walked between fatbins before a section is taken to hold none.
const MAX_PADDING: u64 = 1 << 20;
const CHUNK: usize = 256 << 10;

/// The kept byte ranges of a file of `len` bytes.
#[derive(Debug, Default)]
pub struct Sparse {
    pub(super) len: u64,
    pieces: BTreeMap<u64, Vec<u8>>,
}

impl Sparse {
    /// Bytes kept.
    pub fn kept(&self) -> u64 {
        self.pieces.values().map(|p| p.len() as u64).sum()
    }

    pub(super) fn get(&self, at: u64, len: u64) -> Option<&[u8]> {
        let (start, piece) = self.pieces.range(..=at).next_back()?;
        let from = usize::try_from(at - start).ok()?;
        piece.get(from..from.checked_add(usize::try_from(len).ok()?)?)
    }

    /// Keeps `prefix` as the file's first bytes, in place of the pieces kept inside it (a piece
    /// that runs past its end keeps its part beyond).
    fn put_prefix(&mut self, mut prefix: Vec<u8>) {
        let end = prefix.len() as u64;
        let inside: Vec<u64> = self.pieces.range(..end).map(|(k, _)| *k).collect();
        for k in inside {
            if let Some(piece) = self.pieces.remove(&k)
                && k + piece.len() as u64 > end
            {
                prefix.extend_from_slice(&piece[usize::try_from(end - k).unwrap_or(0)..]);
            }
        }
        // A piece that starts right where the prefix ends is one with it.
        if let Some(next) = self.pieces.remove(&(prefix.len() as u64)) {
            prefix.extend_from_slice(&next);
        }
        self.pieces.insert(0, prefix);
    }

    /// Keeps `bytes` at `at`, appended to the piece that ends there if there is one.
    pub(super) fn insert(&mut self, at: u64, bytes: &[u8]) {
        if let Some((start, piece)) = self.pieces.range_mut(..=at).next_back()
            && start + piece.len() as u64 == at
        {
            piece.extend_from_slice(bytes);
            return;
        }
        self.pieces.insert(at, bytes.to_vec());
    }
}

impl<'a> ReadRef<'a> for &'a Sparse {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        self.get(offset, size).ok_or(())
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        let (start, piece) = self.pieces.range(..=range.start).next_back().ok_or(())?;
        let from = usize::try_from(range.start - start).map_err(|_| ())?;
        let to = usize::try_from(range.end.saturating_sub(*start))
            .map_err(|_| ())?
            .min(piece.len());
        let bytes = piece.get(from..to).ok_or(())?;
        let n = bytes.iter().position(|&b| b == delimiter).ok_or(())?;
        Ok(&bytes[..n])
    }
}

/// Why a stream could not be read sparsely.
#[derive(Debug, thiserror::Error)]
pub enum SparseError {
    /// Not a 64-bit little-endian ELF file with a section table of 64-byte entries.
    #[error("not a 64-bit little-endian ELF file")]
    NotElf64,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

pub(super) fn align8(x: u64) -> u64 {
    x.saturating_add(7) & !7
}

/// What the second pass does with one section.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// Keep it all (names, `.dynamic`, its strings).
    Whole,
    /// Walk its fatbins, then scan what is not one.
    Walk,
}

/// Reads the ELF file of `len` bytes that `open` streams (once, or twice where the first pass
/// did not keep all that is needed), keeping what `layout` and the dynamic-section readers need.
pub fn capture<R: Read>(mut open: impl FnMut() -> std::io::Result<R>, len: u64) -> Result<Sparse, SparseError> {
    let first = Capture::first(len, open()?)?;
    if first.sufficient(|kept| crate::fatbin::read_sparse(kept, "").is_ok()) {
        return Ok(first.guessed());
    }
    first.second(open()?)
}

/// The whole-kept start of a file in the first pass: the ELF header, the program headers, and
/// the sections linkers put first (`.dynsym`, `.dynstr`, the hash tables).
const PREFIX: u64 = 16 << 20;
/// The whole-kept bytes before the section table: the section names (`.shstrtab`), which
/// linkers write last.
const TAIL: u64 = 4 << 20;

/// A capture after its first pass: what that pass kept, and the plan for a second one.
pub struct Capture {
    /// The first pass: the start of the file and the bytes before the section table whole, the
    /// `.dynamic` the program headers name, and every fatbin header found by magic.
    guess: Sparse,
    /// The ELF header and section table alone: where a second pass starts from.
    kept: Sparse,
    plan: Vec<(u64, u64, Action)>,
}

impl Capture {
    /// The first pass over `stream`, a file of `len` bytes.
    pub fn first(len: u64, stream: impl Read) -> Result<Capture, SparseError> {
        let mut guess = Sparse {
            len,
            pieces: BTreeMap::new(),
        };
        let mut s = Stream::new(stream);
        s.tee = (PREFIX.min(len), Vec::new());
        let head = s.keep(&mut guess, 0, 64)?.ok_or(SparseError::NotElf64)?.to_vec();
        let header: &FileHeader64<LittleEndian> = pod::from_bytes(&head).map_err(|()| SparseError::NotElf64)?.0;
        // 64-bit, little-endian, 64-byte section headers, and not a bare cubin (EM_CUDA: those
        // are small and read whole by `cubin`).
        let ident = &header.e_ident;
        if ident.magic != elf::ELFMAG
            || ident.class != elf::ELFCLASS64
            || ident.data != elf::ELFDATA2LSB
            || header.e_shentsize.get(LE) != 64
            || header.e_machine.get(LE) == elf::EM_CUDA
        {
            return Err(SparseError::NotElf64);
        }
        let shoff = header.e_shoff.get(LE);
        let shnum = u64::from(header.e_shnum.get(LE));
        let shstrndx = usize::from(header.e_shstrndx.get(LE).0);
        let table_end = shoff.checked_add(shnum * 64).filter(|e| *e <= len);
        let Some(table_end) = table_end.filter(|_| shoff != 0 && shnum != 0) else {
            // No section table, or more sections than the header counts (then in section 0).
            return Err(SparseError::NotElf64);
        };
        let prefix = PREFIX.min(len);
        // `.dynamic`, as the program headers (right after the ELF header) place it.
        let (phoff, phnum) = (header.e_phoff.get(LE), usize::from(header.e_phnum.get(LE)));
        let program = s
            .keep(&mut guess, phoff, phnum as u64 * 56)?
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let dynamic = pod::slice_from_bytes::<ProgramHeader64<LittleEndian>>(&program, phnum)
            .map(|(all, _)| all)
            .unwrap_or_default()
            .iter()
            .find(|ph| ph.p_type.get(LE) == elf::PT_DYNAMIC)
            .map(|ph| (ph.p_offset.get(LE), ph.p_filesz.get(LE)))
            .filter(|(off, size)| *off >= prefix && *size <= MAX_WHOLE);
        let tail = shoff.saturating_sub(TAIL).max(prefix);
        // The prefix is kept whole as it streams by, and scanned like the rest: a fatbin that
        // starts in it may end far beyond it.
        let from = s.pos;
        match dynamic.filter(|(off, size)| off + size <= tail) {
            Some((off, size)) => {
                scan(&mut s, &mut guess, from, off, true)?;
                s.keep(&mut guess, off, size)?;
                scan(&mut s, &mut guess, off + size, tail, true)?;
            }
            None => scan(&mut s, &mut guess, from, tail, true)?,
        }
        if s.pos < prefix {
            s.discard_to(prefix)?;
        }
        guess.put_prefix(std::mem::take(&mut s.tee.1));
        if tail < table_end {
            s.keep(&mut guess, tail, table_end - tail)?;
        }
        let table = guess.get(shoff, shnum * 64).ok_or(SparseError::NotElf64)?.to_vec();
        let mut kept = Sparse {
            len,
            pieces: BTreeMap::new(),
        };
        kept.insert(0, &head);
        kept.insert(shoff, &table);
        let sections = pod::slice_from_bytes::<SectionHeader64<LittleEndian>>(&table, shnum as usize)
            .map_err(|()| SparseError::NotElf64)?
            .0;
        let mut plan: Vec<(u64, u64, Action)> = Vec::new();
        for (i, sh) in sections.iter().enumerate() {
            let (kind, off, size) = (sh.sh_type.get(LE), sh.sh_offset.get(LE), sh.sh_size.get(LE));
            let whole = i == shstrndx || kind == elf::SHT_DYNAMIC;
            if whole && size <= MAX_WHOLE {
                plan.push((off, size, Action::Whole));
                // `.dynamic`'s strings, in the section it links.
                if kind == elf::SHT_DYNAMIC
                    && let Some(strings) = sections.get(sh.sh_link.get(LE) as usize)
                    && strings.sh_size.get(LE) <= MAX_WHOLE
                {
                    plan.push((strings.sh_offset.get(LE), strings.sh_size.get(LE), Action::Whole));
                }
            } else if kind == elf::SHT_PROGBITS && size >= 16 {
                plan.push((off, size, Action::Walk));
            }
        }
        plan.sort_by_key(|(off, size, _)| (*off, *size));
        plan.dedup_by_key(|(off, size, _)| (*off, *size));
        Ok(Capture { guess, kept, plan })
    }

    /// Whether the first pass kept all that is needed: every whole section the plan names (the
    /// section names, `.dynamic` and its strings), and `reads` holds on it (the fatbin reader
    /// read every header it looked for; a header it did not find reads as not kept).
    pub fn sufficient(&self, reads: impl FnOnce(&Sparse) -> bool) -> bool {
        let whole = self
            .plan
            .iter()
            .filter(|(_, _, a)| matches!(a, Action::Whole))
            .all(|(off, size, _)| *size == 0 || self.guess.get(*off, *size).is_some());
        whole && reads(&self.guess)
    }

    /// What the first pass kept, where [`Capture::sufficient`] holds.
    pub fn guessed(self) -> Sparse {
        self.guess
    }

    /// The second pass over `stream`, the same file from its start: what the plan names, from
    /// the ELF header and section table on.
    pub fn second(self, stream: impl Read) -> Result<Sparse, SparseError> {
        let Capture { mut kept, plan, .. } = self;
        let mut second = Stream::new(stream);
        for (off, size, action) in plan {
            // Sections do not overlap in a well-formed file; one that does starts where the
            // stream already passed, and what of it was not kept reads as missing.
            let end = off.saturating_add(size);
            match action {
                Action::Whole => {
                    second.keep(&mut kept, off, size)?;
                }
                Action::Walk => {
                    if let Some(rest) = walk(&mut second, &mut kept, off, end)? {
                        scan(&mut second, &mut kept, rest, end, false)?;
                    }
                }
            }
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_64_bit_elf_file_is_left_to_a_whole_read() {
        let text = b"not an ELF file, but long enough to hold a header of sixty-four bytes.....";
        let r = capture(|| Ok(&text[..]), text.len() as u64);
        assert!(matches!(r, Err(SparseError::NotElf64)));
        let short = b"\x7fELF";
        assert!(matches!(capture(|| Ok(&short[..]), 4), Err(SparseError::NotElf64)));
    }

    #[test]
    fn a_read_outside_what_was_kept_fails_as_a_truncated_file_would() {
        let mut s = Sparse {
            len: 100,
            pieces: BTreeMap::new(),
        };
        s.insert(8, b"abcdefgh");
        s.insert(16, b"ijkl");
        assert_eq!((&s).read_bytes_at(10, 6), Ok(&b"cdefgh"[..]));
        assert_eq!(
            (&s).read_bytes_at(12, 8),
            Ok(&b"efghijkl"[..]),
            "adjacent pieces are one"
        );
        assert!((&s).read_bytes_at(0, 4).is_err());
        assert!((&s).read_bytes_at(18, 4).is_err());
        assert_eq!(s.kept(), 12);
    }
}
