//! Which bytes of a fatbin section a stream keeps: the fatbin and entry headers, walked end to
//! end or found by magic, as `fatbin::layout` will read them. It ignores what the headers mean
//! beyond their sizes.

use std::io::Read;

use super::stream::Stream;
use super::{FATBIN_MAGIC, MAX_PADDING, Sparse, align8, u16_at, u32_at, u64_at};

/// Keeps the headers of the fatbins laid end to end in `[start, end)`, as `layout::walk_region`
/// reads them. Where it meets something that is neither a fatbin nor its zero padding, it
/// returns that offset: the rest of the section is then scanned for fatbins among other bytes
/// (as `layout::scan_region` reads the large-data sections, which only the names kept in this
/// same pass tell apart).
pub(super) fn walk<R: Read>(
    s: &mut Stream<R>,
    kept: &mut Sparse,
    start: u64,
    end: u64,
) -> std::io::Result<Option<u64>> {
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
pub(super) fn entries<R: Read>(
    s: &mut Stream<R>,
    kept: &mut Sparse,
    start: u64,
    end: u64,
    limit: u64,
) -> std::io::Result<bool> {
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
pub(super) fn scan<R: Read>(
    s: &mut Stream<R>,
    kept: &mut Sparse,
    start: u64,
    end: u64,
    padding: bool,
) -> std::io::Result<()> {
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
