//! A forward-only reader over a decompressing stream that knows its file offset, can look
//! ahead, and keeps what it is asked to in a [`Sparse`]. It ignores what the bytes mean.

use std::io::Read;

use super::{CHUNK, Sparse};

/// A forward-only reader that knows its file offset and can look ahead.
pub(super) struct Stream<R> {
    pub(super) inner: R,
    pub(super) buf: Vec<u8>,
    pub(super) head: usize,
    /// File offset of `buf[head]`.
    pub(super) pos: u64,
    /// Every byte consumed below `.0` is also copied to `.1` (the whole-kept start of a file).
    pub(super) tee: (u64, Vec<u8>),
}

impl<R: Read> Stream<R> {
    pub(super) fn new(inner: R) -> Self {
        Stream {
            inner,
            buf: Vec::with_capacity(CHUNK),
            head: 0,
            pos: 0,
            tee: (0, Vec::new()),
        }
    }

    pub(super) fn available(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Buffers at least `min` bytes from `pos` on; false at the end of the stream before that.
    pub(super) fn fill(&mut self, min: usize) -> std::io::Result<bool> {
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

    pub(super) fn consume(&mut self, n: usize) {
        if self.pos < self.tee.0 {
            let take = n.min(usize::try_from(self.tee.0 - self.pos).unwrap_or(usize::MAX));
            self.tee.1.extend_from_slice(&self.buf[self.head..self.head + take]);
        }
        self.head += n;
        self.pos += n as u64;
    }

    /// Reads and drops what lies before `off`; false at the end of the stream.
    pub(super) fn discard_to(&mut self, off: u64) -> std::io::Result<bool> {
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
    pub(super) fn keep<'k>(&mut self, kept: &'k mut Sparse, off: u64, len: u64) -> std::io::Result<Option<&'k [u8]>> {
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
