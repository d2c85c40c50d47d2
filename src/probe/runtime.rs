//! The run-time environment file kiln installs for a component with `[runtime] env`: a `.pth`
//! file in site-packages whose one `import` line sets each variable with `os.environ.setdefault`
//! when any interpreter of the environment starts (CPython's `site` module runs such lines,
//! https://docs.python.org/3/library/site.html), so the variable is a default: a value the user
//! set in the environment wins. A comment line holds the same variables as JSON, which is what
//! [`read`] reads back.
//!
//! This module owns the file's name, its text and reading it back. It deliberately ignores when
//! the file is written or removed (the install transaction in `build` does that) and whether
//! the values are right for an arch (the caller renders them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The marker of the comment line that holds the variables as JSON.
const MARK: &str = "# kiln-env: ";

/// The file's name in site-packages for `component`.
pub fn file_name(component: &str) -> String {
    format!("kiln-{component}-env.pth")
}

/// The text of the file: comments saying what it is, the JSON line, and the one `import` line.
pub fn render(component: &str, env: &BTreeMap<String, String>) -> String {
    let json = serde_json::to_string(env).unwrap_or_else(|_| "{}".into());
    let mut line = String::from("import os");
    for (k, v) in env {
        // A JSON string is a valid Python string literal (serde_json escapes `"`, `\` and
        // control characters only, each in a form Python reads the same way).
        let k = serde_json::to_string(k).unwrap_or_default();
        let v = serde_json::to_string(v).unwrap_or_default();
        line.push_str(&format!("; os.environ.setdefault({k}, {v})"));
    }
    format!(
        "# Written by kiln for {component}: run-time defaults from its recipe's [runtime] env.\n\
         # A variable already set in the environment wins. Removed when {component} is uninstalled\n\
         # (it is listed in the distribution's RECORD).\n\
         {MARK}{json}\n{line}\n"
    )
}

/// The variables a file's text sets; `None` when it is not a file kiln wrote.
pub fn parse(text: &str) -> Option<BTreeMap<String, String>> {
    let json = text.lines().find_map(|l| l.strip_prefix(MARK))?;
    let import = text.lines().any(|l| l.starts_with("import os"));
    serde_json::from_str(json).ok().filter(|_| import)
}

/// What is in site-packages for one component.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RuntimeFile {
    pub path: PathBuf,
    pub present: bool,
    /// What the file sets, when present and readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
}

/// Reads `component`'s file in the site-packages directory `site`.
pub fn read(site: &Path, component: &str) -> RuntimeFile {
    let path = site.join(file_name(component));
    let text = crate::state::read(&path, crate::state::RECORD_LIMIT, "")
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    RuntimeFile {
        present: text.is_some(),
        env: text.as_deref().and_then(parse),
        path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_file_is_one_import_line_of_setdefaults_and_reads_back() {
        let e = env(&[("FLASHINFER_CUDA_ARCH_LIST", "9.0a 12.0f"), ("MAX_JOBS", "2")]);
        let text = render("flashinfer", &e);
        let import: Vec<&str> = text.lines().filter(|l| l.starts_with("import")).collect();
        assert_eq!(
            import,
            [
                "import os; os.environ.setdefault(\"FLASHINFER_CUDA_ARCH_LIST\", \"9.0a 12.0f\"); os.environ.setdefault(\"MAX_JOBS\", \"2\")"
            ]
        );
        // Every other line is a comment: `site` ignores it.
        assert!(
            text.lines()
                .filter(|l| !l.starts_with("import"))
                .all(|l| l.starts_with('#'))
        );
        assert_eq!(parse(&text), Some(e));
        assert_eq!(parse("import os\n"), None);
        assert_eq!(file_name("flashinfer"), "kiln-flashinfer-env.pth");
    }

    #[test]
    fn python_runs_the_file_and_the_users_value_wins() {
        let Ok(python) = which::which("python3") else { return };
        let dir = tempfile::tempdir().unwrap();
        let e = env(&[("KILN_T_A", "x \"q\" \\ y"), ("KILN_T_B", "default")]);
        std::fs::write(dir.path().join(file_name("demo")), render("demo", &e)).unwrap();
        // `site.addsitedir` processes .pth files as interpreter start-up does for site-packages.
        let code = format!(
            "import site, os; site.addsitedir({:?}); print(os.environ['KILN_T_A']); print(os.environ['KILN_T_B'])",
            dir.path().display().to_string()
        );
        let out = std::process::Command::new(python)
            .args(["-I", "-c", &code])
            .env("KILN_T_B", "mine")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "x \"q\" \\ y\nmine\n");
        let r = read(dir.path(), "demo");
        assert!(r.present);
        assert_eq!(r.env, Some(e));
        assert!(!read(dir.path(), "other").present);
    }
}
