//! The wheel tags an interpreter supports, most preferred first, as the interpreter itself says
//! (`packaging.tags.sys_tags()`, or pip's vendored copy where `packaging` is not installed): the
//! same answer pip uses to pick a wheel, so kiln never re-implements the tag rules (manylinux
//! glibc versions, abi3, ...). It deliberately ignores which wheel to choose (that is
//! `resolve::wheel_choice`).

use std::path::Path;
use std::time::Duration;

use crate::process::Cmd;

const SCRIPT: &str = r#"
try:
    from packaging.tags import sys_tags
except ImportError:
    from pip._vendor.packaging.tags import sys_tags
import sys
sys.stdout.write("\n".join(str(t) for t in sys_tags()) + "\n")
"#;

/// The tags `python` supports (`cp311-cp311-manylinux_2_28_x86_64`, ...), best first.
pub fn supported(python: &Path) -> Result<Vec<String>, String> {
    let out = Cmd::new(python.display().to_string())
        .args(["-I", "-B", "-c", SCRIPT])
        .capture(b"", Duration::from_secs(60))
        .map_err(|e| format!("cannot ask {} for its wheel tags: {e}", python.display()))?;
    let tags: Vec<String> = out
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if tags.is_empty() {
        return Err(format!(
            "{} named no wheel tags (neither `packaging` nor pip is importable): {}",
            python.display(),
            out.stderr.trim()
        ));
    }
    Ok(tags)
}
