//! Checked little-endian reads at file offsets, for `layout`: every offset and size is checked
//! against the file, and a read of bytes a sparse copy did not keep fails like a truncated file.
//! It ignores what the fields mean.

use object::ReadRef;

use super::FatbinError;

/// Reads checked little-endian fields of a file held whole (`&[u8]`) or in part
/// ([`super::sparse::Sparse`]: a read outside what was kept is an error like a truncated file).
pub(super) struct Reader<'a, 'n, R: ReadRef<'a>> {
    data: R,
    pub(super) len: u64,
    name: &'n str,
    _data: std::marker::PhantomData<&'a ()>,
}

impl<'a, 'n, R: ReadRef<'a>> Reader<'a, 'n, R> {
    pub(super) fn new(data: R, name: &'n str) -> Self {
        Reader {
            data,
            len: data.len().unwrap_or(0),
            name,
            _data: std::marker::PhantomData,
        }
    }

    pub(super) fn err(&self, offset: u64, message: impl Into<String>) -> FatbinError {
        FatbinError {
            path: self.name.to_string(),
            offset: Some(offset),
            message: message.into(),
        }
    }

    pub(super) fn bytes(&self, at: u64, len: u64) -> Result<&'a [u8], FatbinError> {
        let end = at.checked_add(len).ok_or_else(|| self.err(at, "size overflows"))?;
        if end > self.len {
            return Err(self.err(at, format!("truncated: needs {len} bytes, the file has {}", self.len)));
        }
        self.data.read_bytes_at(at, len).map_err(|()| {
            self.err(
                at,
                format!(
                    "{len} bytes here were not kept by the streamed read of this wheel member (a kiln \
                     bug: unpack the member and run `kiln arch` on the file, which reads it whole)"
                ),
            )
        })
    }

    pub(super) fn u16(&self, at: u64) -> Result<u16, FatbinError> {
        let b = self.bytes(at, 2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(super) fn u32(&self, at: u64) -> Result<u32, FatbinError> {
        let b = self.bytes(at, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64(&self, at: u64) -> Result<u64, FatbinError> {
        let b = self.bytes(at, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}
