//! The wheel-file build input: members of a named wheel (already in the cache, checked by
//! sha256) copied out under a path of the input's directory. A member ending in `/` is a
//! directory (every file under it, keeping the layout below it); otherwise one file.
//!
//! It owns only the copy out of the zip; the download and its check are
//! [`super::source::cached_download`]'s (one cache entry per wheel sha256, shared by every
//! input that names the same wheel), and what the files are for is the recipe's `why`.

use std::io::BufReader;
use std::path::{Component, Path};

use super::source::{SourceError, io};

/// Copies `member` of the wheel at `wheel` (a local file) to `dest/place`; the number of files.
pub fn extract(wheel: &Path, url: &str, member: &str, place: &str, dest: &Path) -> Result<usize, SourceError> {
    let file = std::fs::File::open(wheel).map_err(io(format!("cannot open {}", wheel.display())))?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| SourceError::Download {
        url: url.into(),
        detail: format!("not a wheel (zip): {e}"),
    })?;
    let dir = member.ends_with('/');
    let target = dest.join(place.trim_end_matches('/'));
    let mut n = 0;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| SourceError::Download {
            url: url.into(),
            detail: format!("unreadable member {i}: {e}"),
        })?;
        if entry.is_dir() {
            continue;
        }
        let name = entry
            .name()
            .map_err(|e| SourceError::Download {
                url: url.into(),
                detail: format!("unreadable member name {i}: {e}"),
            })?
            .into_owned();
        let out = if dir {
            let Some(rest) = name.strip_prefix(member) else {
                continue;
            };
            if !inside(rest) {
                continue;
            }
            target.join(rest)
        } else if name == member {
            target.clone()
        } else {
            continue;
        };
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(io(format!("cannot create {}", parent.display())))?;
        }
        let mut f = std::fs::File::create(&out).map_err(io(format!("cannot write {}", out.display())))?;
        std::io::copy(&mut entry, &mut f).map_err(io(format!("cannot write {}", out.display())))?;
        n += 1;
    }
    if n == 0 {
        return Err(SourceError::NoMember {
            url: url.into(),
            member: member.into(),
        });
    }
    Ok(n)
}

/// A relative path that stays inside (a zip name is untrusted).
fn inside(p: &str) -> bool {
    !p.is_empty() && Path::new(p).components().all(|c| matches!(c, Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn wheel(path: &Path) {
        let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let o = zip::write::SimpleFileOptions::default();
        for (name, body) in [
            ("pkg/third_party/msa/__init__.py", "x = 1\n"),
            ("pkg/third_party/msa/sub/api.py", "y = 2\n"),
            ("pkg/third_party/msa/../../evil", "no\n"),
            ("pkg/third_party/other.py", "z = 3\n"),
        ] {
            z.start_file(name, o).unwrap();
            z.write_all(body.as_bytes()).unwrap();
        }
        z.finish().unwrap();
    }

    #[test]
    fn a_directory_member_lands_under_its_place_and_a_file_member_at_its_path() {
        let t = tempfile::tempdir().unwrap();
        let w = t.path().join("pkg-1.0-py3-none-any.whl");
        wheel(&w);
        let d = t.path().join("out");
        let n = extract(&w, "u", "pkg/third_party/msa/", "python/msa/", &d).unwrap();
        assert_eq!(n, 2, "the two files under the member; the `..` name is left out");
        assert_eq!(
            std::fs::read_to_string(d.join("python/msa/sub/api.py")).unwrap(),
            "y = 2\n"
        );
        assert!(!t.path().join("evil").exists());
        extract(&w, "u", "pkg/third_party/other.py", "a/b.py", &d).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a/b.py")).unwrap(), "z = 3\n");
        let e = extract(&w, "u", "pkg/none/", "x", &d).unwrap_err();
        assert!(matches!(e, SourceError::NoMember { .. }), "{e}");
    }
}
