//! Smoke tests: a recipe's script that proves the component does its job on the GPU (a kernel
//! runs and computes the right answer), run in a fresh interpreter where a GPU of the target
//! arch is present. An import that works proves the library loads; only this proves its
//! kernels run here.
//!
//! Each script runs as `python -I -B FILE` in a scratch directory, with a time limit; exit
//! status 0 is a pass, anything else a failure whose last lines of output are the evidence. Its
//! whole output is kept beside it (`<component>-smoke.log`), and a failure's evidence names it.
//! A serving proof (`[verify] serve`) is a smoke test that starts the real engine on a tiny
//! model and generates tokens; on success it must print one line `kiln-serve: {json}` with what
//! it measured ([`Served`]), which is kept as the evidence. Of any other script, what it prints
//! on success is ignored. No script runs when no GPU of a target arch is present (a pass there
//! would prove nothing about the target). It takes the script as plain values ([`Script`]):
//! which recipe names it is not its concern.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::process::Cmd;

/// One smoke test to run: what it proves and the script itself.
#[derive(Debug, Clone, Copy)]
pub struct Script<'a> {
    /// The component it proves; the script is written to `<component>-smoke.py`.
    pub component: &'a str,
    /// Where the script came from (`smoke/torch.py`), for the evidence.
    pub path: &'a str,
    /// The script's text.
    pub text: &'a str,
    /// A serving proof: its `kiln-serve:` line is read, and it may run for [`SERVE_LIMIT`].
    pub serve: bool,
}

/// How long a serving proof may take at most (an engine's start, CUDA graphs and JIT
/// compiles included), whatever the per-import limit. A margin, not a measurement: SGLang
/// 0.5.11's proof of two models took 91 s on an H200 (docs/gpu-proof.md §9); vLLM 0.20.0's
/// dense model 52.6 s to ready, its MoE model more than 280 s in flashinfer's JIT (§13).
pub const SERVE_LIMIT: Duration = Duration::from_secs(900);

/// The line prefix a serving proof prints its measurements after.
pub const SERVED_PREFIX: &str = "kiln-serve: ";

/// What a serving proof measured: the engine and one entry per model it served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Served {
    /// `sglang 0.5.11`.
    pub engine: String,
    /// The GPU it ran on, as the engine's torch names it.
    #[serde(default)]
    pub gpu: String,
    pub runs: Vec<ServedRun>,
}

/// One model served: what it was, what came out, how fast, and what the engine chose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedRun {
    /// `dense` or `moe`, with the architecture (`LlamaForCausalLM`, 2 layers, random weights).
    pub model: String,
    pub prompts: u32,
    /// Tokens generated over all prompts.
    pub tokens: u64,
    /// Wall time of the generate call.
    pub seconds: f64,
    pub tokens_per_s: f64,
    /// The backends the engine chose (`attention` → `fa3`, `moe` → `triton`), as it reported them.
    #[serde(default)]
    pub backends: std::collections::BTreeMap<String, String>,
    /// Seconds from creating the engine to its being ready.
    #[serde(default)]
    pub start_seconds: f64,
    /// Seconds of a first, untimed request before the timed one (what the engine compiles on
    /// first use lands there, not in `tokens_per_s`); 0 where the proof made none.
    #[serde(default)]
    pub first_seconds: f64,
    /// Backends the proof kept the engine from choosing, and why (empty: it chose freely).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
}

/// A backend a serving proof left out of the engine's choice: vLLM's FlashInfer CUTLASS MoE
/// where flashinfer's fused MoE JIT module is not compiled (its first use would compile it, for
/// longer than the proof may run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The backend as the engine names it (`FlashInfer CUTLASS`).
    pub backend: String,
    pub kind: LeftOutKind,
    /// The module it needs (`fused_moe_90`).
    #[serde(default)]
    pub module: String,
    /// The setting the proof served with instead (`VLLM_USE_FLASHINFER_MOE_FP16=0`).
    #[serde(default)]
    pub env: String,
    /// Where the module was looked for.
    #[serde(default)]
    pub looked_in: Vec<String>,
}

/// Why a backend was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftOutKind {
    /// Its JIT module is neither compiled ahead of time nor in the JIT cache.
    JitModuleNotCompiled,
}

/// What one smoke test did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmokeResult {
    pub ok: bool,
    pub seconds: f64,
    /// On failure: the exit status and the last lines of output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A serving proof's measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<Served>,
}

/// What a smoke test's result is kept under: the target archs it ran for (those a GPU here
/// has) and its script's text.
pub fn key(archs: &[crate::arch::Arch], text: &str) -> String {
    let archs: Vec<String> = archs.iter().map(|a| a.to_string()).collect();
    format!("{}\0{text}", archs.join(" "))
}

/// The target archs a GPU here has: smoke tests run only for these.
pub fn runnable_archs(gpus: &[Arch], targets: &[Arch]) -> Vec<Arch> {
    targets.iter().copied().filter(|t| gpus.contains(t)).collect()
}

/// Runs `script` with `python`, in `scratch` (created if needed), for at most `timeout`.
pub fn run(python: &Path, script: &Script, scratch: &Path, timeout: Duration) -> SmokeResult {
    // What the script leaves running is killed when it returns, even a process that left its
    // group for a session of its own: a serving proof's engine workers and JIT compiles (52 such
    // were found by the next kiln on the H200, after vLLM's proof).
    let _leftovers = crate::process::group::scope();
    let start = Instant::now();
    let fail = |error: String| SmokeResult {
        ok: false,
        seconds: start.elapsed().as_secs_f64(),
        error: Some(error),
        served: None,
    };
    if let Err(e) = std::fs::create_dir_all(scratch) {
        return fail(format!("cannot create {}: {e}", scratch.display()));
    }
    // Not `<component>.py`: the scratch directory is the script's working directory, and a child
    // the script starts without `-I` has it on sys.path, where `vllm.py` would be the `vllm` it
    // imports. vLLM inspects each model in `python -m vllm.model_executor.models.registry`
    // (vllm/model_executor/models/registry.py `_run_in_subprocess`), which then failed with
    // "Model architectures ['LlamaForCausalLM'] failed to be inspected" (docs/gpu-proof.md §13).
    // A name with a hyphen is no module's.
    let file = scratch.join(format!("{}-smoke.py", script.component));
    if let Err(e) = std::fs::write(&file, script.text) {
        return fail(format!("cannot write {}: {e}", file.display()));
    }
    let timeout = if script.serve {
        timeout.max(SERVE_LIMIT)
    } else {
        timeout
    };
    // The output goes to a file beside the script, whatever the outcome (the last run's stays):
    // not to a pipe, which a process the script left behind (an engine's worker) could hold
    // open long after the script exited.
    let log = scratch.join(format!("{}-smoke.log", script.component));
    let _ = std::fs::remove_file(&log);
    let outcome = Cmd::new(python.display().to_string())
        .args(["-I", "-B"])
        .arg(file.display().to_string())
        .cwd(scratch)
        // One script may prove several components (`serve/engine.py`): this says which.
        .env("KILN_COMPONENT", script.component)
        .timeout(timeout)
        .run_logged(&log);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let kept = format!(" (its whole output: {})", log.display());
    match outcome {
        Ok(()) if script.serve => match served(&text) {
            Ok(s) => SmokeResult {
                ok: true,
                seconds: start.elapsed().as_secs_f64(),
                error: None,
                served: Some(s),
            },
            Err(why) => fail(format!("{}: {why}{kept}", script.path)),
        },
        Ok(()) => SmokeResult {
            ok: true,
            seconds: start.elapsed().as_secs_f64(),
            error: None,
            served: None,
        },
        Err(f) => {
            // The log opens with the command line, its directory and its environment.
            let output = text
                .lines()
                .skip_while(|l| l.starts_with("$ ") || l.starts_with("# in ") || l.starts_with("KILN_COMPONENT="));
            let tail: Vec<&str> = output.filter(|l| !l.trim().is_empty()).collect();
            let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
            fail(format!("{} ({}): {tail}{kept}", script.path, f.status))
        }
    }
}

/// The measurements a serving proof printed (its last `kiln-serve:` line); a proof that
/// generated no tokens proved nothing.
fn served(stdout: &str) -> Result<Served, String> {
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(SERVED_PREFIX))
        .ok_or_else(|| format!("exited 0 but printed no `{}` line", SERVED_PREFIX.trim()))?;
    let s: Served =
        serde_json::from_str(line).map_err(|e| format!("its `{}` line is not one: {e}", SERVED_PREFIX.trim()))?;
    match s.runs.iter().find(|r| r.tokens == 0) {
        _ if s.runs.is_empty() => Err("it served no model".into()),
        Some(r) => Err(format!("{} generated no tokens", r.model)),
        None => Ok(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serving_proof_counts_only_with_tokens() {
        let line = |tokens: u64| {
            format!(
                "noise\n{SERVED_PREFIX}{{\"engine\":\"sglang 0.5.11\",\"runs\":[{{\"model\":\"dense\",\"prompts\":2,\"tokens\":{tokens},\"seconds\":0.5,\"tokens_per_s\":{},\"backends\":{{\"attention\":\"fa3\"}}}}]}}\n",
                tokens as f64 / 0.5
            )
        };
        let s = served(&line(64)).unwrap();
        assert_eq!(s.runs[0].tokens, 64);
        assert_eq!(s.runs[0].backends["attention"], "fa3");
        assert_eq!(served(&line(0)).unwrap_err(), "dense generated no tokens");
        assert!(s.runs[0].left_out.is_empty());
        let with_left_out = line(64).replace(
            "\"backends\":{",
            "\"left_out\":[{\"backend\":\"FlashInfer CUTLASS\",\"kind\":\"jit-module-not-compiled\",\"module\":\"fused_moe_90\",\"env\":\"VLLM_USE_FLASHINFER_MOE_FP16=0\"}],\"backends\":{",
        );
        let l = &served(&with_left_out).unwrap().runs[0].left_out[0];
        assert_eq!(
            (l.kind, l.module.as_str()),
            (LeftOutKind::JitModuleNotCompiled, "fused_moe_90")
        );
        assert!(
            served(&with_left_out.replace("jit-module-not-compiled", "because"))
                .unwrap_err()
                .contains("unknown variant `because`")
        );
        assert!(
            served("all fine\n")
                .unwrap_err()
                .contains("printed no `kiln-serve:` line")
        );
        assert!(
            served(&format!("{SERVED_PREFIX}{{}}"))
                .unwrap_err()
                .contains("is not one")
        );
    }
}
