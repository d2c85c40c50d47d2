//! A remote file as `Read + Seek`, each read an HTTP range request of at least [`CHUNK`] bytes:
//! so that the `zip` crate reads a wheel's central directory and one member (its METADATA) out
//! of a wheel of hundreds of megabytes, fetching a few hundred kilobytes. For indexes that serve
//! no core metadata beside a wheel (PEP 658).
//!
//! It owns the position and one read-ahead buffer; the requests are [`crate::download`]'s.

use std::io::{Read, Seek, SeekFrom};

/// The smallest request: a wheel's end of central directory and, usually, all of it.
const CHUNK: u64 = 256 << 10;

pub struct Ranged {
    url: String,
    len: u64,
    pos: u64,
    /// The last range fetched: its start and bytes.
    buf: (u64, Vec<u8>),
    policy: crate::download::Policy,
    /// Bytes fetched in all, for the caller to report.
    pub fetched: u64,
}

impl Ranged {
    /// Opens `url` with one request for its last [`CHUNK`] bytes (which also gives its size).
    pub fn open(url: &str) -> Result<Ranged, String> {
        let policy = crate::download::Policy::from_env().map_err(|e| e.to_string())?;
        let (tail, len) = crate::download::read_range(url, &format!("-{CHUNK}"), &policy).map_err(|e| e.to_string())?;
        let start = len.saturating_sub(tail.len() as u64);
        Ok(Ranged {
            url: url.to_string(),
            len,
            pos: 0,
            fetched: tail.len() as u64,
            buf: (start, tail),
            policy,
        })
    }
}

impl Read for Ranged {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.len || out.is_empty() {
            return Ok(0);
        }
        let (start, ref bytes) = self.buf;
        let inside = self.pos >= start && self.pos < start + bytes.len() as u64;
        if !inside {
            let end = (self.pos + CHUNK.max(out.len() as u64)).min(self.len) - 1;
            let (bytes, _) = crate::download::read_range(&self.url, &format!("{}-{end}", self.pos), &self.policy)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            self.fetched += bytes.len() as u64;
            self.buf = (self.pos, bytes);
        }
        let (start, ref bytes) = self.buf;
        let at = (self.pos - start) as usize;
        let n = out.len().min(bytes.len() - at);
        out[..n].copy_from_slice(&bytes[at..at + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Ranged {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.pos)
    }
}

/// The `*.dist-info/METADATA` of the remote wheel at `url`.
pub fn wheel_metadata(url: &str) -> Result<String, String> {
    let reader = Ranged::open(url)?;
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| format!("{url} is not a readable zip: {e}"))?;
    let name = zip
        .file_names()
        .filter_map(|n| n.ok())
        .find(|n| n.ends_with(".dist-info/METADATA") && n.matches('/').count() == 1)
        .map(|n| n.to_string())
        .ok_or_else(|| format!("{url} holds no .dist-info/METADATA"))?;
    let mut member = zip.by_name(&name).map_err(|e| format!("{url}: {name}: {e}"))?;
    let mut text = String::new();
    member
        .by_ref()
        .take(16 << 20)
        .read_to_string(&mut text)
        .map_err(|e| format!("{url}: {name}: {e}"))?;
    Ok(text)
}
