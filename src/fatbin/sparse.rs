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

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Range;

use object::ReadRef;

const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const SHT_PROGBITS: u32 = 1;
const SHT_DYNAMIC: u32 = 6;
/// The most of one whole section kept (names, `.dynamic`, `.dynstr`).
const MAX_WHOLE: u64 = 16 << 20;
/// Zero padding walked between fatbins before a section is taken to hold none.
const MAX_PADDING: u64 = 1 << 20;
const CHUNK: usize = 256 << 10;

/// The kept byte ranges of a file of `len` bytes.
#[derive(Debug, Default)]
pub struct Sparse {
    len: u64,
    pieces: BTreeMap<u64, Vec<u8>>,
}

impl Sparse {
    /// Bytes kept.
    pub fn kept(&self) -> u64 {
        self.pieces.values().map(|p| p.len() as u64).sum()
    }

    fn get(&self, at: u64, len: u64) -> Option<&[u8]> {
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
    fn insert(&mut self, at: u64, bytes: &[u8]) {
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

/// A forward-only reader that knows its file offset and can look ahead.
struct Stream<R> {
    inner: R,
    buf: Vec<u8>,
    head: usize,
    /// File offset of `buf[head]`.
    pos: u64,
    /// Every byte consumed below `.0` is also copied to `.1` (the whole-kept start of a file).
    tee: (u64, Vec<u8>),
}

impl<R: Read> Stream<R> {
    fn new(inner: R) -> Self {
        Stream {
            inner,
            buf: Vec::with_capacity(CHUNK),
            head: 0,
            pos: 0,
            tee: (0, Vec::new()),
        }
    }

    fn available(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Buffers at least `min` bytes from `pos` on; false at the end of the stream before that.
    fn fill(&mut self, min: usize) -> std::io::Result<bool> {
        if self.available() >= min {
            return Ok(true);
        }
        self.buf.drain(..self.head);
        self.head = 0;
        let want = min.max(CHUNK);
        while self.buf.len() < want {
            let have = self.buf.len();
            self.buf.resize(want, 0);
            let n = loop {
                match self.inner.read(&mut self.buf[have..]) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            };
            let n = match n {
                Ok(n) => n,
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(e);
                }
            };
            self.buf.truncate(have + n);
            if n == 0 {
                break;
            }
        }
        Ok(self.available() >= min)
    }

    fn consume(&mut self, n: usize) {
        if self.pos < self.tee.0 {
            let take = n.min(usize::try_from(self.tee.0 - self.pos).unwrap_or(usize::MAX));
            self.tee.1.extend_from_slice(&self.buf[self.head..self.head + take]);
        }
        self.head += n;
        self.pos += n as u64;
    }

    /// Reads and drops what lies before `off`; false at the end of the stream.
    fn discard_to(&mut self, off: u64) -> std::io::Result<bool> {
        while self.pos < off {
            if !self.fill(1)? {
                return Ok(false);
            }
            let n = self
                .available()
                .min(usize::try_from(off - self.pos).unwrap_or(usize::MAX));
            self.consume(n);
        }
        Ok(true)
    }

    /// Makes `[off, off + len)` part of `kept` (what of it lies before `pos` must be there
    /// already) and returns it; `None` where the stream cannot give it.
    fn keep<'k>(&mut self, kept: &'k mut Sparse, off: u64, len: u64) -> std::io::Result<Option<&'k [u8]>> {
        let end = off.saturating_add(len);
        if end > kept.len {
            return Ok(None);
        }
        if self.pos < off && !self.discard_to(off)? {
            return Ok(None);
        }
        if end > self.pos {
            let n = usize::try_from(end - self.pos).unwrap_or(usize::MAX);
            if !self.fill(n)? {
                return Ok(None);
            }
            let at = self.pos;
            kept.insert(at, &self.buf[self.head..self.head + n]);
            self.consume(n);
        }
        Ok(kept.get(off, len))
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

fn align8(x: u64) -> u64 {
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
        // 64-bit, little-endian, 64-byte section headers, and not a bare cubin (EM_CUDA, 190:
        // those are small and read whole by `cubin`).
        if head[..4] != *b"\x7fELF"
            || head[4] != 2
            || head[5] != 1
            || u16_at(&head, 0x3a) != 64
            || u16_at(&head, 0x12) == 190
        {
            return Err(SparseError::NotElf64);
        }
        let (shoff, shnum, shstrndx) = (u64_at(&head, 0x28), u64::from(u16_at(&head, 0x3c)), u16_at(&head, 0x3e));
        let table_end = shoff.checked_add(shnum * 64).filter(|e| *e <= len);
        let Some(table_end) = table_end.filter(|_| shoff != 0 && shnum != 0) else {
            // No section table, or more sections than the header counts (then in section 0).
            return Err(SparseError::NotElf64);
        };
        let prefix = PREFIX.min(len);
        // `.dynamic`, as the program headers (right after the ELF header) place it: PT_DYNAMIC,
        // type 2.
        let (phoff, phnum) = (u64_at(&head, 0x20), u64::from(u16_at(&head, 0x38)));
        let program = s
            .keep(&mut guess, phoff, phnum * 56)?
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let dynamic = program
            .chunks_exact(56)
            .find(|ph| u32_at(ph, 0) == 2)
            .map(|ph| (u64_at(ph, 8), u64_at(ph, 0x20)))
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
        let section = |i: usize| {
            let s = &table[i * 64..(i + 1) * 64];
            // sh_type, sh_offset, sh_size, sh_link.
            (u32_at(s, 4), u64_at(s, 0x18), u64_at(s, 0x20), u32_at(s, 0x28))
        };
        let mut plan: Vec<(u64, u64, Action)> = Vec::new();
        for i in 0..shnum as usize {
            let (kind, off, size, link) = section(i);
            let whole = i == usize::from(shstrndx) || kind == SHT_DYNAMIC;
            if whole && size <= MAX_WHOLE {
                plan.push((off, size, Action::Whole));
                if kind == SHT_DYNAMIC && (link as usize) < shnum as usize {
                    let (_, loff, lsize, _) = section(link as usize);
                    if lsize <= MAX_WHOLE {
                        plan.push((loff, lsize, Action::Whole));
                    }
                }
            } else if kind == SHT_PROGBITS && size >= 16 {
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

/// Keeps the headers of the fatbins laid end to end in `[start, end)`, as `layout::walk_region`
/// reads them. Where it meets something that is neither a fatbin nor its zero padding, it
/// returns that offset: the rest of the section is then scanned for fatbins among other bytes
/// (as `layout::scan_region` reads the large-data sections, which only the names kept in this
/// same pass tell apart).
fn walk<R: Read>(s: &mut Stream<R>, kept: &mut Sparse, start: u64, end: u64) -> std::io::Result<Option<u64>> {
    let mut off = start;
    let mut padding = 0;
    while off < end {
        let want = (end - off).min(16);
        let Some(b) = s.keep(kept, off, want)? else {
            return Ok(None);
        };
        if want < 16 {
            return Ok(None);
        }
        if u32_at(b, 0) != FATBIN_MAGIC {
            if u64_at(b, 0) != 0 || padding >= MAX_PADDING {
                return Ok(Some(off));
            }
            padding += 8;
            off += 8;
            continue;
        }
        padding = 0;
        let (header, size) = (u64::from(u16_at(b, 6)), u64_at(b, 8));
        let fat_end = off.checked_add(header).and_then(|b| b.checked_add(size));
        let Some(fat_end) = fat_end.filter(|e| header >= 16 && *e <= end) else {
            return Ok(Some(off + 8));
        };
        if header > 16 && s.keep(kept, off, header)?.is_none() {
            return Ok(None);
        }
        if !entries(s, kept, off + header, fat_end, u64::MAX)? {
            return Ok(Some(off + 8));
        }
        off = align8(fat_end).max(off + 16);
    }
    Ok(None)
}

/// Keeps the entry headers (whole, with a concatenated entry's table and the options) in
/// `[start, end)` of one fatbin, streaming past the payloads; false where they do not read.
/// From `limit` on it stops (true): what lies there is kept whole by the caller, so no payload
/// is streamed past it.
fn entries<R: Read>(s: &mut Stream<R>, kept: &mut Sparse, start: u64, end: u64, limit: u64) -> std::io::Result<bool> {
    let mut e = start;
    while e < end {
        if e >= limit {
            return Ok(true);
        }
        if end - e < 64 {
            return Ok(false);
        }
        let Some(h) = s.keep(kept, e, 64)? else {
            return Ok(false);
        };
        let (header, payload) = (u64::from(u32_at(h, 4)), u64_at(h, 8));
        let Some(next) = e.checked_add(header).and_then(|p| p.checked_add(payload)) else {
            return Ok(false);
        };
        if header < 64 || next > end || s.keep(kept, e, header)?.is_none() {
            return Ok(false);
        }
        e = next;
    }
    Ok(true)
}

/// Keeps, in `[start, end)` of a section that also holds other data, each 8-aligned fatbin
/// header and the entries after it, as `layout::scan_region` looks for them.
fn scan<R: Read>(s: &mut Stream<R>, kept: &mut Sparse, start: u64, end: u64, padding: bool) -> std::io::Result<()> {
    let mut off = align8(start);
    while off + 16 <= end {
        // Where the stream already passed (a fatbin just kept), on from the next 8-aligned byte.
        if s.pos > off {
            off = align8(s.pos);
            continue;
        }
        if !s.discard_to(off)? || !s.fill(16)? {
            return Ok(());
        }
        // Every 8-aligned position in what is buffered, up to where a header still fits.
        let avail = s.available().min(usize::try_from(end - off).unwrap_or(usize::MAX));
        let buf = &s.buf[s.head..s.head + avail];
        let hit = (0..avail.saturating_sub(15))
            .step_by(8)
            .find(|&i| u32_at(buf, i) == FATBIN_MAGIC && u16_at(buf, i + 4) == 1 && u16_at(buf, i + 6) == 16);
        let Some(i) = hit else {
            let step = (avail.saturating_sub(15) + 7) & !7;
            s.consume(step.max(8).min(s.available()));
            off = s.pos;
            continue;
        };
        let at = off + i as u64;
        s.consume(i);
        let Some(h) = s.keep(kept, at, 16)? else { return Ok(()) };
        // A fatbin may run past `end` (into what the caller keeps whole): its headers up to there.
        let fat_end = (at + 16).checked_add(u64_at(h, 8)).filter(|e| *e <= kept.len);
        off = match fat_end {
            Some(fe) if entries(s, kept, at + 16, fe, end)? => align8(fe).max(at + 16),
            _ => at + 8,
        };
        // The zero padding after a fatbin, which `layout::walk_region` reads on its way to the
        // next one (a scan of the whole file does not know where `.nv_fatbin` is yet).
        // Each 8 bytes are looked at before they are taken, so that the next fatbin's header,
        // which ends the padding, is still there for the scan.
        let mut zeros = 0;
        while padding && off > at + 8 && off + 8 <= end && zeros < MAX_PADDING {
            if s.pos > off || !s.discard_to(off)? || !s.fill(8)? || u64_at(&s.buf[s.head..], 0) != 0 {
                break;
            }
            s.keep(kept, off, 8)?;
            off += 8;
            zeros += 8;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own executable (a large ELF file with symbols and debug info, no fatbins):
    /// the libraries it links read the same from what was kept as from the whole file, and
    /// what was kept is a small part of it.
    #[test]
    fn the_dynamic_section_reads_the_same_from_what_was_kept() {
        let exe = std::env::current_exe().unwrap();
        let whole = std::fs::read(&exe).unwrap();
        let kept = capture(|| std::fs::File::open(&exe), whole.len() as u64).unwrap();
        let needed = crate::probe::needed::needed(&kept);
        assert!(!needed.is_empty());
        assert_eq!(needed, crate::probe::needed::needed(&whole[..]));
        assert!(
            kept.kept() < whole.len() as u64 / 4,
            "kept {} of {}",
            kept.kept(),
            whole.len()
        );
        let report = crate::fatbin::read_sparse(&kept, "exe").unwrap();
        assert_eq!(
            report.fatbins.len(),
            crate::fatbin::read_bytes(&whole, "exe").unwrap().fatbins.len()
        );
    }

    /// The second pass, where the first did not suffice, gives the same.
    #[test]
    fn the_second_pass_reads_the_same_as_the_first() {
        let exe = std::env::current_exe().unwrap();
        let whole = std::fs::read(&exe).unwrap();
        let open = || std::fs::File::open(&exe).unwrap();
        let kept = Capture::first(whole.len() as u64, open())
            .unwrap()
            .second(open())
            .unwrap();
        assert_eq!(
            crate::probe::needed::needed(&kept),
            crate::probe::needed::needed(&whole[..])
        );
        assert!(crate::fatbin::read_sparse(&kept, "exe").is_ok());
        assert!(kept.kept() < 16 << 20, "kept {}", kept.kept());
    }

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
