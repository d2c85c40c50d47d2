//! The values an installed engine accepts for a flag, read from its own source with Python's
//! `ast` (no import, no server): a module-level list or tuple of strings, a `Literal[...]`
//! alias, or an enum class. One interpreter run answers every question. It deliberately does not
//! know which file holds which flag (the recipe says so) and reports a name it cannot read as
//! `None`, never as an empty list.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::Cmd;

const SCRIPT: &str = include_str!("choices.py");

/// The values of `name` in each `(file, name, enum member names instead of values)`, in order; `Err` when the interpreter could not
/// run the script at all.
pub fn read(python: &Path, asks: &[(PathBuf, String, bool)]) -> Result<Vec<Option<Vec<String>>>, String> {
    if asks.is_empty() {
        return Ok(Vec::new());
    }
    let input: Vec<serde_json::Value> = asks
        .iter()
        .map(|(f, n, names)| serde_json::json!({"file": f, "name": n, "members": if *names { "names" } else { "values" }}))
        .collect();
    let stdin = serde_json::to_vec(&input).map_err(|e| e.to_string())?;
    let out = Cmd::new(python.display().to_string())
        .args(["-I", "-B", "-c", SCRIPT])
        .capture(&stdin, Duration::from_secs(30))
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.success {
        return Err(format!(
            "reading the engine's choices failed ({}): {}",
            out.status,
            out.stderr.trim()
        ));
    }
    serde_json::from_str(out.stdout.trim()).map_err(|e| format!("unexpected answer from the choices script: {e}"))
}
