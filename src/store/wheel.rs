//! Whether a wheel file is the wheel of a given distribution and version, by its own contents:
//! the file name (`NAME-VERSION-...whl`, PEP 427), one `*.dist-info/` directory whose `METADATA`
//! says that `Name` and `Version` (public parts compared: a local label such as `+cu130` is
//! the same release), and a `RECORD` that lists every file of the wheel with its sha256, each
//! file hashed while it is decompressed (PEP 376/427 hashes: urlsafe base64 without padding),
//! and lists nothing the wheel lacks. `RECORD` itself and its signatures (`RECORD.jws`,
//! `RECORD.p7s`) carry no hash.
//!
//! It deliberately ignores whether the code is any good (only a build from the source proves
//! that) and the wheel's tags. Every name it reports comes from the wheel and is escaped.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::str::FromStr;

use base64::Engine;
use sha2::{Digest, Sha256};

/// What the wheel must be.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The distribution name (any spelling; compared normalized, PEP 503).
    pub dist: &'a str,
    /// The version (PEP 440; its public part is compared).
    pub version: &'a str,
}

/// How a wheel is not what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("it cannot be read as a wheel: {0}")]
    Unreadable(String),
    #[error("its file name `{0}` is not a wheel's (NAME-VERSION-TAGS.whl)")]
    FileName(String),
    #[error("it holds {0} dist-info directories with METADATA and RECORD, not one")]
    DistInfo(usize),
    #[error("it is a wheel of `{found}`, not of `{expected}` (its {place})")]
    Name {
        found: String,
        expected: String,
        place: &'static str,
    },
    #[error("it is version `{found}`, not `{expected}` (its {place})")]
    Version {
        found: String,
        expected: String,
        place: &'static str,
    },
    #[error("its file `{0}` is not listed with a sha256 in its RECORD")]
    Unlisted(String),
    #[error("its file `{0}` does not have the sha256 its RECORD lists")]
    Hash(String),
    #[error("its RECORD lists `{0}`, which it does not hold")]
    Missing(String),
    #[error("its RECORD line `{0}` is not `path,sha256=<hash>,size`")]
    RecordLine(String),
}

/// Most a wheel is decompressed to while its files are hashed (a zip bomb costs time, not disk
/// or memory: nothing is kept).
const MAX_TOTAL: u64 = 64 << 30;

/// Checks the wheel at `path` against `want` (see the module doc).
pub fn check(path: &Path, want: Expected) -> Result<(), Mismatch> {
    let (mut zip, info) = identity_of(path, want)?;
    hashes(&mut zip, &info)
}

/// Only whether the wheel at `path` is the wheel of `want` by its file name and its METADATA,
/// without hashing its files: what a wheel says it is, for wheels no key or lock names by hash.
pub fn identity(path: &Path, want: Expected) -> Result<(), Mismatch> {
    identity_of(path, want).map(|_| ())
}

type Zip = zip::ZipArchive<std::io::BufReader<std::fs::File>>;

/// The file name and METADATA checks; the open archive and its dist-info directory.
fn identity_of(path: &Path, want: Expected) -> Result<(Zip, String), Mismatch> {
    let unreadable = |e: String| Mismatch::Unreadable(e);
    let file_name = path
        .file_name()
        .map(|n| crate::shown::path(Path::new(n)))
        .unwrap_or_default();
    let stem = file_name
        .strip_suffix(".whl")
        .ok_or_else(|| Mismatch::FileName(file_name.clone()))?;
    let mut fields = stem.split('-');
    let (Some(name), Some(version)) = (fields.next(), fields.next()) else {
        return Err(Mismatch::FileName(file_name));
    };
    same_name(name, want.dist, "file name")?;
    same_version(version, want.version, "file name")?;

    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| unreadable(e.to_string()))?;
    if !file.metadata().map_err(|e| unreadable(e.to_string()))?.is_file() {
        return Err(unreadable("it is not a regular file".into()));
    }
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| unreadable(e.to_string()))?;
    let names: Vec<String> = (0..zip.len())
        .map(|i| {
            let m = zip.by_index(i).map_err(|e| unreadable(e.to_string()))?;
            m.name().map(|n| n.into_owned()).map_err(|e| unreadable(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    let infos: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_suffix("/METADATA"))
        .filter(|d| d.ends_with(".dist-info") && !d.contains('/'))
        .filter(|d| names.iter().any(|n| n == &format!("{d}/RECORD")))
        .collect();
    let [info] = infos[..] else {
        return Err(Mismatch::DistInfo(infos.len()));
    };
    let info = info.to_string();
    let metadata = read_member(&mut zip, &format!("{info}/METADATA"), 1 << 20).map_err(unreadable)?;
    let (name, version) = headers(&metadata);
    same_name(&name, want.dist, "METADATA")?;
    same_version(&version, want.version, "METADATA")?;
    Ok((zip, info))
}

/// Every file of the wheel hashed against its RECORD, and nothing listed missing.
fn hashes(zip: &mut Zip, info: &str) -> Result<(), Mismatch> {
    let unreadable = |e: String| Mismatch::Unreadable(e);
    let record = read_member(zip, &format!("{info}/RECORD"), 64 << 20).map_err(unreadable)?;
    let mut listed = parse_record(&record)?;
    let unhashed = [
        format!("{info}/RECORD"),
        format!("{info}/RECORD.jws"),
        format!("{info}/RECORD.p7s"),
    ];
    let mut total = 0u64;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| unreadable(e.to_string()))?;
        if member.is_dir() {
            continue;
        }
        let name = member.name().map_err(|e| unreadable(e.to_string()))?.into_owned();
        let hash = listed.remove(&name);
        if unhashed.contains(&name) {
            continue;
        }
        let Some(Some(want_hash)) = hash else {
            return Err(Mismatch::Unlisted(crate::shown::text(&name)));
        };
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = member
                .read(&mut buf)
                .map_err(|e| unreadable(format!("{}: {e}", crate::shown::text(&name))))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > MAX_TOTAL {
                return Err(unreadable(format!("it unpacks to more than {MAX_TOTAL} bytes")));
            }
            h.update(&buf[..n]);
        }
        let got = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize());
        if got != want_hash.trim_end_matches('=') {
            return Err(Mismatch::Hash(crate::shown::text(&name)));
        }
    }
    match listed.keys().find(|k| !unhashed.contains(k)) {
        Some(missing) => Err(Mismatch::Missing(crate::shown::text(missing))),
        None => Ok(()),
    }
}

fn read_member<R: std::io::Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    limit: u64,
) -> Result<String, String> {
    let member = zip
        .by_name(name)
        .map_err(|e| format!("{}: {e}", crate::shown::text(name)))?;
    let mut text = String::new();
    member
        .take(limit)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", crate::shown::text(name)))?;
    Ok(text)
}

/// `Name` and `Version` of a METADATA file (its header block, RFC 822 style).
fn headers(metadata: &str) -> (String, String) {
    let (mut name, mut version) = (String::new(), String::new());
    for line in metadata.lines().take_while(|l| !l.trim().is_empty()) {
        if let Some(v) = line.strip_prefix("Name:") {
            name = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("Version:") {
            version = v.trim().to_string();
        }
    }
    (name, version)
}

/// RECORD's lines: path -> its `sha256=` hash (None for a line without one). CSV: a path may
/// be quoted, with `""` for a quote inside.
fn parse_record(text: &str) -> Result<BTreeMap<String, Option<String>>, Mismatch> {
    let bad = |line: &str| Mismatch::RecordLine(crate::shown::text(line));
    let mut out = BTreeMap::new();
    for row in super::record::rows(text).map_err(|line| bad(&line))? {
        let hash = match row.hash.as_str() {
            "" => None,
            h => Some(h.strip_prefix("sha256=").ok_or_else(|| bad(&row.path))?.to_string()),
        };
        out.insert(row.path, hash);
    }
    Ok(out)
}

fn same_name(found: &str, expected: &str, place: &'static str) -> Result<(), Mismatch> {
    let norm = |n: &str| pep508_rs::PackageName::from_str(n).map(|p| p.to_string()).ok();
    match (norm(found), norm(expected)) {
        (Some(a), Some(b)) if a == b => Ok(()),
        _ => Err(Mismatch::Name {
            found: crate::shown::text(found),
            expected: crate::shown::text(expected),
            place,
        }),
    }
}

fn same_version(found: &str, expected: &str, place: &'static str) -> Result<(), Mismatch> {
    let public = |v: &str| {
        pep440_rs::Version::from_str(v)
            .ok()
            .map(pep440_rs::Version::without_local)
    };
    match (public(found), public(expected)) {
        (Some(a), Some(b)) if a == b => Ok(()),
        _ => Err(Mismatch::Version {
            found: crate::shown::text(found),
            expected: crate::shown::text(expected),
            place,
        }),
    }
}

/// A small real wheel for unit tests: `<dist>-<version>-py3-none-any.whl` in `dir` with a
/// METADATA, one module holding `body`, and a true RECORD.
#[cfg(test)]
pub(crate) fn test_wheel(dir: &Path, dist: &str, version: &str, body: &[u8]) -> std::path::PathBuf {
    let path = dir.join(format!("{dist}-{version}-py3-none-any.whl"));
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    let info = format!("{dist}-{version}.dist-info");
    let meta = format!("Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n");
    let mut record = String::new();
    for (name, data) in [
        (format!("{info}/METADATA"), meta.as_bytes()),
        (format!("{dist}/__init__.py"), body),
    ] {
        z.start_file(name.as_str(), opts).unwrap();
        std::io::Write::write_all(&mut z, data).unwrap();
        let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(data));
        record.push_str(&format!("{name},sha256={h},{}\n", data.len()));
    }
    record.push_str(&format!("{info}/RECORD,,\n"));
    z.start_file(format!("{info}/RECORD").as_str(), opts).unwrap();
    std::io::Write::write_all(&mut z, record.as_bytes()).unwrap();
    z.finish().unwrap();
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel of `files` (name, bytes) with a RECORD made from `record` (None: a true one).
    fn wheel(dir: &Path, file: &str, files: &[(&str, &[u8])], record: Option<&str>) -> std::path::PathBuf {
        let path = dir.join(file);
        let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        let mut lines = String::new();
        for (name, data) in files {
            z.start_file(*name, opts).unwrap();
            std::io::Write::write_all(&mut z, data).unwrap();
            let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(data));
            lines.push_str(&format!("{name},sha256={h},{}\n", data.len()));
        }
        lines.push_str("x-1.0.dist-info/RECORD,,\n");
        z.start_file("x-1.0.dist-info/RECORD", opts).unwrap();
        std::io::Write::write_all(&mut z, record.unwrap_or(&lines).as_bytes()).unwrap();
        z.finish().unwrap();
        path
    }

    const META: &[u8] = b"Metadata-Version: 2.1\nName: X\nVersion: 1.0\n\nbody";

    #[test]
    fn a_wheel_is_checked_by_name_version_and_every_record_hash() {
        let t = tempfile::tempdir().unwrap();
        let want = Expected {
            dist: "x",
            version: "1.0",
        };
        let good = [("x-1.0.dist-info/METADATA", META), ("x/__init__.py", b"print(1)\n")];
        let w = wheel(t.path(), "x-1.0-py3-none-any.whl", &good, None);
        assert_eq!(check(&w, want), Ok(()));
        assert_eq!(
            check(
                &w,
                Expected {
                    dist: "x",
                    version: "1.0+cu130"
                }
            ),
            Ok(())
        );
        assert!(matches!(
            check(
                &w,
                Expected {
                    dist: "y",
                    version: "1.0"
                }
            ),
            Err(Mismatch::Name { .. })
        ));
        assert!(matches!(
            check(
                &w,
                Expected {
                    dist: "x",
                    version: "2.0"
                }
            ),
            Err(Mismatch::Version { .. })
        ));

        // Another distribution's METADATA inside a wheel named as this one.
        let other = [
            ("x-1.0.dist-info/METADATA", &b"Name: evil\nVersion: 1.0\n"[..]),
            ("x/a.py", b""),
        ];
        let w = wheel(t.path(), "x-1.0-py3-none-any.whl", &other, None);
        assert!(matches!(check(&w, want), Err(Mismatch::Name { place: "METADATA", .. })));

        // A file that is not what RECORD says, one RECORD leaves out, one it lists but lacks.
        let lying = "x-1.0.dist-info/METADATA,sha256=AAAA,1\nx/__init__.py,sha256=AAAA,1\n";
        let w = wheel(t.path(), "x-1.0-py3-none-any.whl", &good, Some(lying));
        assert_eq!(check(&w, want), Err(Mismatch::Hash("x-1.0.dist-info/METADATA".into())));
        let meta_hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(META));
        let short = format!("x-1.0.dist-info/METADATA,sha256={meta_hash},1\n");
        let w = wheel(t.path(), "x-1.0-py3-none-any.whl", &good, Some(&short));
        assert_eq!(check(&w, want), Err(Mismatch::Unlisted("x/__init__.py".into())));
        let long = format!("{short}x/__init__.py,sha256=AAAA,1\nx/\ngone.py,sha256=AAAA,1\n");
        let w = wheel(t.path(), "x-1.0-py3-none-any.whl", &good[..1], Some(&long));
        assert!(matches!(
            check(&w, want),
            Err(Mismatch::Missing(_) | Mismatch::RecordLine(_))
        ));
        // Not a wheel at all.
        std::fs::write(t.path().join("x-1.0-py3-none-any.whl"), b"not a zip").unwrap();
        let w = t.path().join("x-1.0-py3-none-any.whl");
        assert!(matches!(check(&w, want), Err(Mismatch::Unreadable(_))));
    }
}
