//! A wheel file read before it is installed: every shared object in it (read from the zip, each
//! member bounded) through the fatbin reader, the CUDA runtime they link, and the `Requires-Dist`
//! of its METADATA. Paths are the ones its RECORD will list once installed (`.data/purelib/` and
//! `.data/platlib/` prefixes removed), so that `[[binaries.optional]]` globs match both.
//!
//! It deliberately does not judge archs or pins (`resolve::wheel_choice` does) and writes
//! nothing: a member is decompressed into memory, read, and dropped.

use std::io::Read;
use std::path::Path;

use crate::fatbin::{self, FileReport};

/// The most one member may hold once decompressed (vLLM's largest, FA2, is 308 MB).
pub const MAX_MEMBER: u64 = 2 << 30;
/// The most all shared objects of one wheel may hold together.
pub const MAX_TOTAL: u64 = 8 << 30;
/// The most METADATA may hold.
const MAX_METADATA: u64 = 4 << 20;

/// What a wheel holds, as far as choosing it goes.
#[derive(Debug, Clone, Default)]
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
    /// Bytes of shared objects decompressed and read.
    pub bytes_read: u64,
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
        let mut data = Vec::with_capacity(size as usize);
        if let Err(e) = (&mut member).take(MAX_MEMBER).read_to_end(&mut data) {
            out.unreadable.push(format!("{rel}: {e}"));
            continue;
        }
        out.bytes_read += data.len() as u64;
        if super::needed::links_driver(&data) {
            out.links_driver.push(rel.clone());
        }
        out.provides.push(file_name.to_string());
        let needed = super::needed::needed(&data);
        if !needed.is_empty() {
            out.needed.insert(rel.clone(), needed);
        }
        match fatbin::read_bytes(&data, &rel) {
            Ok(r) if r.images().next().is_some() => {
                if out.cudart.is_none() {
                    out.cudart = super::binaries::cudart_major(&data);
                }
                out.cuda.push((rel, r));
            }
            Ok(_) => out.plain += 1,
            Err(e) => out.unreadable.push(e.to_string()),
        }
    }
    Ok(out)
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
