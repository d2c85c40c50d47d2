//! A wheel file read before it is installed: every shared object in it (read from the zip, each
//! member bounded) through the fatbin reader, the CUDA runtime they link, and the `Requires-Dist`
//! of its METADATA. Paths are the ones its RECORD will list once installed (`.data/purelib/` and
//! `.data/platlib/` prefixes removed), so that `[[binaries.optional]]` globs match both.
//!
//! It deliberately does not judge archs or pins (`resolve::wheel_choice` does) and writes
//! nothing: a small member is decompressed into memory, read, and dropped; a large ELF member is
//! streamed (once, twice where the first pass did not keep enough) and only its headers kept
//! ([`WHOLE_UP_TO`]).

use std::io::Read;
use std::path::Path;

use crate::fatbin::{self, FileReport, sparse};

/// The most one member may hold once decompressed (vLLM's largest, FA2, is 308 MB).
pub const MAX_MEMBER: u64 = 2 << 30;
/// Members up to this size are decompressed into memory and read whole; larger ELF members are
/// streamed and only their headers kept (`fatbin::sparse`), so that judging a wheel takes tens
/// of megabytes, not the size of its largest library (sglang-kernel's flash_ops: 1.07 GB).
pub const WHOLE_UP_TO: u64 = 32 << 20;
/// The most all shared objects of one wheel may hold together.
pub const MAX_TOTAL: u64 = 8 << 30;
/// The most METADATA may hold.
const MAX_METADATA: u64 = 4 << 20;

/// What a wheel holds, as far as choosing it goes.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct WheelFacts {
    /// CUDA binaries: RECORD path and what the fatbin reader found.
    pub cuda: Vec<(String, FileReport)>,
    /// Shared objects without CUDA code.
    pub plain: usize,
    /// Members that could not be read, with the reason.
    pub unreadable: Vec<String>,
    /// The CUDA runtime major its binaries link (`libcudart.so.13`).
    pub cudart: Option<u64>,
    /// `Requires-Dist` lines of its METADATA, as written.
    pub requires: Vec<String>,
    /// Bytes of shared objects decompressed and read (a member streamed twice counts twice).
    pub bytes_read: u64,
    /// Of those, the bytes held in memory, summed over the members (each member's are dropped
    /// once it is read): all of a member read whole, the headers of one streamed.
    pub bytes_kept: u64,
    /// Shared objects that link the NVIDIA driver's library (`libcuda.so.1`, see
    /// [`super::needed`]): they cannot load on a machine without the driver.
    pub links_driver: Vec<String>,
    /// Each shared object's `DT_NEEDED` libraries, by RECORD path.
    pub needed: std::collections::BTreeMap<String, Vec<String>>,
    /// The file names of the shared objects the wheel ships (what it provides itself).
    pub provides: Vec<String>,
}

/// Reads the wheel at `path`.
pub fn read(path: &Path) -> Result<WheelFacts, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| format!("{} is not a wheel (zip): {e}", path.display()))?;
    let mut out = WheelFacts::default();
    for i in 0..zip.len() {
        let mut member = match zip.by_index(i) {
            Ok(m) => m,
            Err(e) => {
                out.unreadable.push(format!("member {i}: {e}"));
                continue;
            }
        };
        let name = match member.name() {
            Ok(n) => n.into_owned(),
            Err(e) => {
                out.unreadable.push(format!("member {i}: {e}"));
                continue;
            }
        };
        if name.ends_with(".dist-info/METADATA") && name.matches('/').count() == 1 {
            let mut text = String::new();
            if (&mut member).take(MAX_METADATA).read_to_string(&mut text).is_ok() {
                out.requires = requires_dist(&text);
            }
            continue;
        }
        let file_name = name.rsplit('/').next().unwrap_or(&name);
        if member.is_dir() || !super::binaries::may_hold_cuda(file_name) {
            continue;
        }
        let rel = record_path(&name);
        let size = member.size();
        if size > MAX_MEMBER || out.bytes_read + size > MAX_TOTAL {
            out.unreadable.push(format!(
                "{rel}: {size} bytes, over the bound of {MAX_MEMBER} per member and {MAX_TOTAL} per wheel"
            ));
            continue;
        }
        drop(member);
        // A large ELF member is streamed and only its headers kept; anything else (a bare
        // cubin, an archive, a 32-bit object) is read whole, as a small member is.
        if size > WHOLE_UP_TO {
            let io = |e: zip::result::ZipError| sparse::SparseError::Io(std::io::Error::other(e));
            // One pass where it keeps all that is needed, a second where it did not.
            let captured = zip
                .by_index(i)
                .map_err(io)
                .and_then(|m| sparse::Capture::first(size, m))
                .and_then(|c| {
                    if c.sufficient(|kept| fatbin::read_sparse(kept, &rel).is_ok()) {
                        return Ok((c.guessed(), 1));
                    }
                    Ok((c.second(zip.by_index(i).map_err(io)?)?, 2))
                });
            match captured {
                Ok((kept, passes)) => {
                    out.bytes_read += size * passes;
                    out.bytes_kept += kept.kept();
                    judge(&mut out, &rel, file_name, &kept, || fatbin::read_sparse(&kept, &rel));
                    continue;
                }
                Err(sparse::SparseError::NotElf64) => {}
                Err(sparse::SparseError::Io(e)) => {
                    out.unreadable.push(format!("{rel}: {e}"));
                    continue;
                }
            }
        }
        let mut data = Vec::with_capacity(size as usize);
        let read = zip
            .by_index(i)
            .map_err(std::io::Error::other)
            .and_then(|m| m.take(MAX_MEMBER).read_to_end(&mut data));
        if let Err(e) = read {
            out.unreadable.push(format!("{rel}: {e}"));
            continue;
        }
        out.bytes_read += data.len() as u64;
        out.bytes_kept += data.len() as u64;
        judge(&mut out, &rel, file_name, &data[..], || fatbin::read_bytes(&data, &rel));
    }
    Ok(out)
}

/// What one shared object (held whole, or sparsely) adds to `out`: the libraries it links, and
/// what the fatbin reader (`read`) found in it.
fn judge<'a, R: object::ReadRef<'a>>(
    out: &mut WheelFacts,
    rel: &str,
    file_name: &str,
    data: R,
    read: impl FnOnce() -> Result<FileReport, fatbin::FatbinError>,
) {
    if super::needed::links_driver(data) {
        out.links_driver.push(rel.to_string());
    }
    out.provides.push(file_name.to_string());
    let needed = super::needed::needed(data);
    if !needed.is_empty() {
        out.needed.insert(rel.to_string(), needed);
    }
    match read() {
        Ok(r) if r.images().next().is_some() => {
            if out.cudart.is_none() {
                out.cudart = super::binaries::cudart_major(data);
            }
            out.cuda.push((rel.to_string(), r));
        }
        Ok(_) => out.plain += 1,
        Err(e) => out.unreadable.push(e.to_string()),
    }
}

/// The path a member gets once installed: `x-1.data/purelib/a/b.so` → `a/b.so`.
fn record_path(member: &str) -> String {
    if let Some((first, rest)) = member.split_once('/')
        && first.ends_with(".data")
        && let Some((scheme, tail)) = rest.split_once('/')
        && matches!(scheme, "purelib" | "platlib")
    {
        return tail.to_string();
    }
    member.to_string()
}

/// The `Requires-Dist` values of a METADATA file (core metadata, RFC 822 style headers; the
/// body after the first empty line is the description and is not read).
fn requires_dist(text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("Requires-Dist:"))
        .map(|v| v.trim().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_scheme_prefixes_are_removed_and_metadata_headers_read() {
        assert_eq!(record_path("x-1.data/platlib/x/_C.so"), "x/_C.so");
        assert_eq!(record_path("x-1.data/scripts/tool.so"), "x-1.data/scripts/tool.so");
        assert_eq!(record_path("x/_C.abi3.so"), "x/_C.abi3.so");
        let meta = "Metadata-Version: 2.4\nName: vllm\nRequires-Dist: torch==2.14.0\nRequires-Dist: numba==0.65.0; extra == \"x\"\n\nRequires-Dist: not-a-header\n";
        assert_eq!(requires_dist(meta), ["torch==2.14.0", "numba==0.65.0; extra == \"x\""]);
    }
}
