//! An image's bytes: a cubin ELF or PTX text, cut from the file and decompressed (LZ4 block or
//! zstd frame) on request only. Every size is bounded before anything is allocated. It
//! deliberately ignores what the bytes mean.

use super::image::{Compression, Image};

/// The largest payload [`payload`] will produce.
const MAX_UNCOMPRESSED: u64 = 1 << 30;

/// Why a payload could not be produced.
#[derive(Debug, thiserror::Error)]
#[error("payload at {offset:#x}: {message}")]
pub struct PayloadError {
    pub offset: u64,
    pub message: String,
}

/// The image's bytes (a cubin ELF or PTX text), decompressed when compressed. Output is bounded
/// by the size the header states, which must be below 1 GiB.
pub fn payload(data: &[u8], img: &Image) -> Result<Vec<u8>, PayloadError> {
    let fail = |m: String| PayloadError {
        offset: img.offset,
        message: m,
    };
    let start = usize::try_from(img.payload_at).map_err(|_| fail("offset too large".into()))?;
    let len = usize::try_from(img.payload_len).map_err(|_| fail("size too large".into()))?;
    let raw = data
        .get(start..start.saturating_add(len))
        .ok_or_else(|| fail("payload past the end of the data".into()))?;
    let whole = match img.compression {
        Compression::None => raw.to_vec(),
        c => {
            if img.uncompressed == 0 || img.uncompressed > MAX_UNCOMPRESSED {
                return Err(fail(format!("implausible uncompressed size {}", img.uncompressed)));
            }
            let want = img.uncompressed as usize;
            // LZ4 cannot expand more than ~255:1; refuse a header that claims more.
            if c == Compression::Lz4 && img.uncompressed > (raw.len() as u64).saturating_mul(255) + 64 {
                return Err(fail(format!(
                    "LZ4 payload of {} bytes cannot expand to {}",
                    raw.len(),
                    img.uncompressed
                )));
            }
            match c {
                Compression::Lz4 => lz4_flex::block::decompress(raw, want).map_err(|e| fail(format!("LZ4: {e}")))?,
                _ => {
                    use std::io::Read;
                    let mut dec =
                        ruzstd::decoding::StreamingDecoder::new(raw).map_err(|e| fail(format!("zstd: {e}")))?;
                    let mut out = Vec::with_capacity(want.min(64 << 20));
                    (&mut dec)
                        .take(want as u64 + 1)
                        .read_to_end(&mut out)
                        .map_err(|e| fail(format!("zstd: {e}")))?;
                    if out.len() != want {
                        return Err(fail(format!("zstd gave {} bytes, the header says {want}", out.len())));
                    }
                    out
                }
            }
        }
    };
    match img.blob_range {
        None => Ok(whole),
        Some((at, size)) => {
            let a = usize::try_from(at).map_err(|_| fail("offset too large".into()))?;
            let s = usize::try_from(size).map_err(|_| fail("size too large".into()))?;
            whole
                .get(a..a.saturating_add(s))
                .map(<[u8]>::to_vec)
                .ok_or_else(|| fail("sub-image past the end of the blob".into()))
        }
    }
}
