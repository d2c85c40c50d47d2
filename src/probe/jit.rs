//! JIT proofs: for a component whose kernels are compiled at run time (flashinfer's JIT, the
//! CuTe DSL), a recipe script that compiles one small real kernel through the component's own
//! JIT path, for the target archs, with the toolkit it will use. No GPU is needed: the proof is
//! the compiled binary, read back with the fatbin reader, not a run.
//!
//! The script runs as `python -I -B FILE` in a fresh scratch directory (`KILN_JIT_DIR`, where
//! it must write what it compiles), with the environment the caller gives, and a time limit. It
//! prints one JSON line per kernel: `{"kernel": "silu_and_mul", "files": ["/abs/x.so"],
//! "seconds": 14.2}`; exit status 0 means it believes it compiled them all. kiln then reads each
//! named file itself: a kernel whose files hold no kernel image is a failed proof whatever the
//! script said.
//!
//! It deliberately ignores whether the images suit the target arch (that is
//! `resolve::status`, with the run rules) and when a proof is worth running (the caller decides,
//! and caches the result by what decides it).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::fatbin::{self, FileReport};
use crate::probe::smoke::Script;
use crate::process::Cmd;

/// What kiln knows of a component's JIT for the target archs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum JitOutcome {
    /// The proof ran (it may have failed).
    Ran(JitProof),
    /// The proof could not run here, and why (no toolkit, an arch the toolkit cannot spell).
    Blocked { reason: String },
}

/// What one JIT proof did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JitProof {
    /// The script ran to the end and every kernel it named left a readable binary with images.
    pub ok: bool,
    pub seconds: f64,
    pub kernels: Vec<JitKernel>,
    /// On failure: the exit status and the lines of output that say why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One kernel the script compiled, and what its binaries hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JitKernel {
    pub kernel: String,
    /// The name kiln asked for (`KILN_JIT_KERNELS`), when it differs from the module's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
    /// Seconds the script says the compile took.
    #[serde(default)]
    pub seconds: f64,
    pub files: Vec<FileReport>,
}

/// The line a script prints for each kernel.
#[derive(Deserialize)]
struct Line {
    kernel: String,
    /// The name kiln asked for in `KILN_JIT_KERNELS`, when the script prints it.
    #[serde(default)]
    asked: Option<String>,
    files: Vec<String>,
    #[serde(default)]
    seconds: f64,
}

/// Runs `script` with `python` and `env` in a fresh `scratch` directory, for at most `timeout`.
pub fn run(python: &Path, script: &Script, env: &[(String, String)], scratch: &Path, timeout: Duration) -> JitProof {
    // What the proof leaves running (a compiler it started) is killed when it returns.
    let _leftovers = crate::process::group::scope();
    let start = Instant::now();
    let fail = |error: String, kernels: Vec<JitKernel>| JitProof {
        ok: false,
        seconds: start.elapsed().as_secs_f64(),
        kernels,
        error: Some(error),
    };
    let _ = std::fs::remove_dir_all(scratch);
    if let Err(e) = std::fs::create_dir_all(scratch) {
        return fail(format!("cannot create {}: {e}", scratch.display()), Vec::new());
    }
    let file = scratch.join(format!("{}-jit.py", script.component));
    if let Err(e) = std::fs::write(&file, script.text) {
        return fail(format!("cannot write {}: {e}", file.display()), Vec::new());
    }
    let mut cmd = Cmd::new(python.display().to_string())
        .args(["-I", "-B"])
        .arg(file.display().to_string())
        .cwd(scratch)
        .env("KILN_JIT_DIR", scratch.display().to_string());
    for (k, v) in env {
        cmd = cmd.env(k.clone(), v.clone());
    }
    let out = match cmd.capture(b"", timeout) {
        Ok(out) => out,
        Err(e) => return fail(format!("cannot run {}: {e}", python.display()), Vec::new()),
    };
    let mut kernels = Vec::new();
    let mut problems = Vec::new();
    for line in out.stdout.lines().filter(|l| l.trim_start().starts_with('{')) {
        match serde_json::from_str::<Line>(line) {
            Ok(l) => kernels.push(read_kernel(l, &mut problems)),
            Err(e) => problems.push(format!("{}: a line kiln cannot read ({e}): {line}", script.path)),
        }
    }
    if !out.success {
        let text = format!("{}\n{}", out.stdout, out.stderr);
        return fail(format!("{} ({}): {}", script.path, out.status, why(&text)), kernels);
    }
    if kernels.is_empty() {
        problems.push(format!(
            "{} compiled no kernel (it printed no kernel line)",
            script.path
        ));
    }
    if !problems.is_empty() {
        return fail(problems.join("; "), kernels);
    }
    JitProof {
        ok: true,
        seconds: start.elapsed().as_secs_f64(),
        kernels,
        error: None,
    }
}

/// Reads the files a kernel line names; a file that holds no image is a problem.
fn read_kernel(line: Line, problems: &mut Vec<String>) -> JitKernel {
    let mut files = Vec::new();
    for f in &line.files {
        match fatbin::read_file(Path::new(f)) {
            Ok(r) if r.images().next().is_some() => files.push(r),
            Ok(_) => problems.push(format!("{}: {f} holds no kernel image", line.kernel)),
            Err(e) => problems.push(format!("{}: {e}", line.kernel)),
        }
    }
    if line.files.is_empty() {
        problems.push(format!("{}: the script named no file", line.kernel));
    }
    JitKernel {
        kernel: line.kernel,
        asked: line.asked,
        seconds: line.seconds,
        files,
    }
}

/// The lines of a failed script's output that say why: error lines first, else the last lines.
fn why(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("error") || l.contains("fatal") || l.contains("not found") || l.contains("could not find")
        })
        .collect();
    let pick = if errors.is_empty() {
        &lines[lines.len().saturating_sub(3)..]
    } else {
        &errors[errors.len().saturating_sub(3)..]
    };
    pick.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(text: &str) -> Script<'_> {
        Script {
            component: "demo",
            path: "jit/demo.py",
            text,
            serve: false,
        }
    }

    /// Runs `text` as a proof script with python3 in a scratch directory.
    fn prove(text: &str) -> JitProof {
        let dir = tempfile::tempdir().unwrap();
        let python = which::which("python3").unwrap();
        run(
            &python,
            &script(text),
            &[("A".into(), "1".into())],
            &dir.path().join("s"),
            Duration::from_secs(30),
        )
    }

    #[test]
    fn a_kernel_whose_file_holds_no_image_is_no_proof() {
        let text = "import json, os\np = os.path.join(os.environ['KILN_JIT_DIR'], 'k.so')\nopen(p, 'wb').write(b'not a binary')\nprint(json.dumps({'kernel': 'k', 'files': [p]}))\n";
        let p = prove(text);
        assert!(!p.ok);
        assert!(p.error.as_deref().unwrap_or("").contains("k: "), "{p:?}");
    }

    #[test]
    fn a_failing_script_says_the_error_line_not_only_the_last_lines() {
        let text = "import sys\nprint('RuntimeError: Could not find nvcc', file=sys.stderr)\nprint('cleanup 1')\nprint('cleanup 2')\nprint('cleanup 3')\nsys.exit(3)\n";
        let p = prove(text);
        assert!(!p.ok);
        let e = p.error.unwrap();
        assert!(e.contains("Could not find nvcc") && e.contains("jit/demo.py"), "{e}");
    }

    #[test]
    fn a_script_that_names_no_kernel_proves_nothing() {
        let p = prove("print('done')\n");
        assert!(!p.ok);
        assert!(p.error.unwrap().contains("compiled no kernel"));
    }
}
