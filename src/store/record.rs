//! A distribution's `RECORD`: one CSV row per file, `path,hash,size` (the binary distribution
//! format, <https://packaging.python.org/en/latest/specifications/recording-installed-packages/>),
//! read with the `csv` crate, so a quoted path with commas or quotes in it is one path.
//!
//! It ignores whether the files are there and whether they match their hashes: the wheel check
//! (`wheel.rs`) and the readers of installed distributions decide that.

/// One row of a `RECORD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Relative to the directory that holds the dist-info (site-packages, or the wheel's root).
    pub path: String,
    /// `sha256=<urlsafe base64>`, or empty for the files that carry none (`RECORD` itself).
    pub hash: String,
}

/// The rows of `text`; the first row that is not `path,hash,size` is the error, as its line.
pub fn rows(text: &str) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    for (i, rec) in reader.records().enumerate() {
        let line_of = |n: Option<u64>| {
            let n = n.map_or(i, |n| n.saturating_sub(1) as usize);
            text.lines().nth(n).unwrap_or_default().to_string()
        };
        let rec = rec.map_err(|e| line_of(e.position().map(|p| p.line())))?;
        if rec.len() == 1 && rec[0].trim().is_empty() {
            continue;
        }
        if rec.len() != 3 || rec[0].is_empty() {
            return Err(line_of(rec.position().map(|p| p.line())));
        }
        out.push(Row {
            path: rec[0].to_string(),
            hash: rec[1].to_string(),
        });
    }
    Ok(out)
}

/// The paths `text` lists, the rows that cannot be read left out (an installed distribution's
/// `RECORD` as installers write it; nothing is trusted from it but the paths).
pub fn paths(text: &str) -> Vec<String> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes())
        .records()
        .flatten()
        .filter_map(|r| r.get(0).map(str::to_string))
        .filter(|p| !p.trim().is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain and quoted paths (a comma, a doubled quote), empty hashes, blank lines; a row of
    /// another shape is the error, given as its line.
    #[test]
    fn rows_are_csv_with_quoted_paths() {
        let text = "a/b.py,sha256=x,12\n\"a,\"\"b\"\".py\",sha256=y,3\n\nx-1.dist-info/RECORD,,\n";
        let rows = rows(text).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].path, "a,\"b\".py");
        assert_eq!(rows[2].hash, "");
        assert_eq!(paths(text), ["a/b.py", "a,\"b\".py", "x-1.dist-info/RECORD"]);
        assert_eq!(super::rows("a,sha256=x,1\nb,sha256=y\n"), Err("b,sha256=y".to_string()));
        assert!(paths("  \n").is_empty());
    }
}
