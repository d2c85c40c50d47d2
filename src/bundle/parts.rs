//! A bundle split into numbered parts that each fit a size limit (for media or transfers that cap
//! a file's size), and joined back before it is unpacked.
//!
//! The parts are consecutive byte ranges of the one tar, named `NAME.01-of-12` ... `NAME.12-of-12`
//! (zero-padded, so that `cat NAME.*-of-12 > NAME` joins them in order too). It deliberately
//! ignores any other naming; a missing part is an error that names it, and a short one fails
//! the unpack as a truncated archive.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Why the parts of a bundle could not be written or found.
#[derive(Debug, thiserror::Error)]
pub enum PartsError {
    #[error("cannot split {}: {source}", path.display())]
    Split {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} {} missing: the bundle has {of} parts and each is needed ({have} are here; bring the others and run this again)", names(.0), if .0.len() == 1 { "is" } else { "are" }, of = .1, have = .1 - .0.len())]
    Missing(Vec<PathBuf>, usize),
    #[error("cannot join the parts of {} into {}: {source}", first.display(), into.display())]
    Join {
        first: PathBuf,
        into: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The name of part `k` (from 1) of `n` of `whole`.
pub fn part_name(whole: &Path, k: usize, n: usize) -> PathBuf {
    let width = n.to_string().len();
    let mut name = whole.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{k:0width$}-of-{n}"));
    whole.with_file_name(name)
}

/// Splits `whole` into parts of at most `max` bytes beside it (removing `whole` and any earlier
/// parts of the same name) and returns them in order. A bundle that fits is left whole.
pub fn split(whole: &Path, max: u64) -> Result<Vec<PathBuf>, PartsError> {
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PartsError::Split { path, source }
    };
    let len = std::fs::metadata(whole).map_err(fail(whole))?.len();
    let max = max.max(1);
    if len <= max {
        return Ok(vec![whole.to_path_buf()]);
    }
    let n = len.div_ceil(max) as usize;
    remove_parts(whole);
    let mut input = BufReader::new(File::open(whole).map_err(fail(whole))?);
    let mut parts = Vec::with_capacity(n);
    for k in 1..=n {
        let path = part_name(whole, k, n);
        let mut out = BufWriter::new(File::create(&path).map_err(fail(&path))?);
        std::io::copy(&mut (&mut input).take(max), &mut out).map_err(fail(&path))?;
        out.into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
            .map_err(fail(&path))?;
        parts.push(path);
    }
    std::fs::remove_file(whole).map_err(fail(whole))?;
    Ok(parts)
}

/// Removes the parts of earlier splits of `whole` (any `NAME.K-of-N` beside it).
fn remove_parts(whole: &Path) {
    let (Some(dir), Some(name)) = (whole.parent(), whole.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let name = name.to_string_lossy();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        if file.strip_prefix(name.as_ref()).and_then(of_part).is_some() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `(k, n)` of a name suffix `.K-of-N`.
fn of_part(suffix: &str) -> Option<(usize, usize)> {
    let (k, n) = suffix.strip_prefix('.')?.split_once("-of-")?;
    let k: usize = k.parse().ok()?;
    let n: usize = n.parse().ok()?;
    (k >= 1 && k <= n).then_some((k, n))
}

/// The files that make up the bundle the user named: `given` itself when it is a whole bundle;
/// every part when it names one part (`NAME.03-of-12`) or is the name the parts share (`NAME`,
/// with `NAME.01-of-12` beside it).
pub fn of(given: &Path) -> Result<Vec<PathBuf>, PartsError> {
    let file = given.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let named = file
        .rfind('.')
        .and_then(|i| of_part(&file[i..]).map(|(_, n)| (given.with_file_name(&file[..i]), n)));
    let (whole, n) = match named {
        Some(found) => found,
        None if given.exists() => return Ok(vec![given.to_path_buf()]),
        None => match first_part_beside(given) {
            Some(n) => (given.to_path_buf(), n),
            None => return Ok(vec![given.to_path_buf()]),
        },
    };
    let all: Vec<PathBuf> = (1..=n).map(|k| part_name(&whole, k, n)).collect();
    // Every missing part at once: a transfer of many parts resumes with exactly those.
    let missing: Vec<PathBuf> = all.iter().filter(|p| !p.is_file()).cloned().collect();
    if missing.is_empty() {
        Ok(all)
    } else {
        Err(PartsError::Missing(missing, n))
    }
}

fn names(parts: &[PathBuf]) -> String {
    parts
        .iter()
        .map(|p| crate::shown::path(p))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `n` when `NAME.1-of-N` (zero-padded) lies beside `whole`.
fn first_part_beside(whole: &Path) -> Option<usize> {
    let dir = whole
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = whole.file_name()?.to_string_lossy().into_owned();
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let file = e.file_name().to_string_lossy().into_owned();
        match of_part(file.strip_prefix(&name)?) {
            Some((1, n)) => Some(n),
            _ => None,
        }
    })
}

/// Joins `parts` into `into` (written whole or not at all).
pub fn join(parts: &[PathBuf], into: &Path) -> Result<(), PartsError> {
    let fail = |source| PartsError::Join {
        first: parts.first().cloned().unwrap_or_default(),
        into: into.to_path_buf(),
        source,
    };
    let result = (|| {
        let mut out = BufWriter::new(File::create(into)?);
        for p in parts {
            std::io::copy(&mut crate::store::archive::open_regular(p)?, &mut out)?;
        }
        out.flush()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(into);
        return Err(fail(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_bundle_joins_back_byte_for_byte_from_any_of_its_names() {
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("stack.tar");
        let bytes: Vec<u8> = (0..25_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&whole, &bytes).unwrap();
        let parts = split(&whole, 2_400).unwrap();
        assert_eq!(parts.len(), 11);
        assert_eq!(parts[0], dir.path().join("stack.tar.01-of-11"));
        assert!(!whole.exists());
        for given in [whole.clone(), parts[4].clone()] {
            assert_eq!(of(&given).unwrap(), parts);
        }
        let joined = dir.path().join("joined");
        join(&parts, &joined).unwrap();
        assert_eq!(std::fs::read(&joined).unwrap(), bytes);

        std::fs::remove_file(&parts[6]).unwrap();
        std::fs::remove_file(&parts[8]).unwrap();
        let err = of(&parts[0]).unwrap_err().to_string();
        assert!(
            err.contains("stack.tar.07-of-11, ")
                && err.contains("stack.tar.09-of-11 are missing: the bundle has 11 parts")
                && err.contains("(9 are here"),
            "{err}"
        );

        // A bundle that fits stays one file, and is found under its own name.
        std::fs::write(&whole, b"small").unwrap();
        assert_eq!(split(&whole, 100).unwrap(), std::slice::from_ref(&whole));
        assert_eq!(of(&whole).unwrap(), [whole]);
    }
}
