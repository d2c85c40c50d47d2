//! Smoke tests: a recipe's script that proves the component does its job on the GPU (a kernel
//! runs and computes the right answer), run in a fresh interpreter where a GPU of the target
//! arch is present. An import that works proves the library loads; only this proves its
//! kernels run here.
//!
//! Each script runs as `python -I -B FILE` in a scratch directory, with a time limit; exit
//! status 0 is a pass, anything else a failure whose last lines of output are the evidence.
//! It deliberately ignores what the script prints on success, and never runs a script when no
//! GPU of a target arch is present (a pass there would prove nothing about the target). It
//! takes the script as plain values ([`Script`]): which recipe names it is not its concern.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::process::Cmd;

/// One smoke test to run: what it proves and the script itself.
#[derive(Debug, Clone, Copy)]
pub struct Script<'a> {
    /// The component it proves; the script is written to `<component>.py`.
    pub component: &'a str,
    /// Where the script came from (`smoke/torch.py`), for the evidence.
    pub path: &'a str,
    /// The script's text.
    pub text: &'a str,
}

/// What one smoke test did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeResult {
    pub ok: bool,
    pub seconds: f64,
    /// On failure: the exit status and the last lines of output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The target archs a GPU here has: smoke tests run only for these.
pub fn runnable_archs(gpus: &[Arch], targets: &[Arch]) -> Vec<Arch> {
    targets.iter().copied().filter(|t| gpus.contains(t)).collect()
}

/// Runs `script` with `python`, in `scratch` (created if needed), for at most `timeout`.
pub fn run(python: &Path, script: &Script, scratch: &Path, timeout: Duration) -> SmokeResult {
    let start = Instant::now();
    let fail = |error: String| SmokeResult {
        ok: false,
        seconds: start.elapsed().as_secs_f64(),
        error: Some(error),
    };
    if let Err(e) = std::fs::create_dir_all(scratch) {
        return fail(format!("cannot create {}: {e}", scratch.display()));
    }
    let file = scratch.join(format!("{}.py", script.component));
    if let Err(e) = std::fs::write(&file, script.text) {
        return fail(format!("cannot write {}: {e}", file.display()));
    }
    let cmd = Cmd::new(python.display().to_string())
        .args(["-I", "-B"])
        .arg(file.display().to_string())
        .cwd(scratch);
    match cmd.capture(b"", timeout) {
        Err(e) => fail(format!("cannot run {}: {e}", python.display())),
        Ok(out) if out.success => SmokeResult {
            ok: true,
            seconds: start.elapsed().as_secs_f64(),
            error: None,
        },
        Ok(out) => {
            let text = format!("{}\n{}", out.stdout, out.stderr);
            let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
            fail(format!("{} ({}): {tail}", script.path, out.status))
        }
    }
}
