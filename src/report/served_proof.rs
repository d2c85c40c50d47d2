//! A serving proof's measurements in words: per model the tokens, the rate, the backends the
//! engine chose and those the proof left out (with what would let the engine choose them). It
//! owns only that wording; whether the proof passed is `probe::smoke`'s, and what the engine
//! would have chosen unhindered is the proof script's (`recipes/serve/engine.py`).

/// A serving proof in words: per model, the tokens, the rate and the backends the engine chose.
pub(super) fn served_text(
    script: &str,
    archs: &[crate::arch::Arch],
    seconds: f64,
    s: &crate::probe::smoke::Served,
) -> String {
    let runs: Vec<String> = s
        .runs
        .iter()
        .map(|r| {
            let backends: Vec<String> = r.backends.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let left_out: String = r.left_out.iter().map(left_out_text).collect();
            let first = if r.first_seconds > 0.0 {
                format!(" after a first request of {:.1} s", r.first_seconds)
            } else {
                String::new()
            };
            format!(
                "{}: {} tokens at {:.1} tokens/s{first}{}{left_out}",
                r.model,
                r.tokens,
                r.tokens_per_s,
                if backends.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", backends.join(", "))
                }
            )
        })
        .collect();
    format!(
        "serving proof {script}: {} served on {}{} — {} ({seconds:.1} s)",
        s.engine,
        super::reason::join(archs, ", "),
        if s.gpu.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.gpu)
        },
        runs.join("; ")
    )
}

/// A backend the serving proof left out, in words, with what would let the engine choose it.
fn left_out_text(l: &crate::probe::smoke::LeftOut) -> String {
    use crate::probe::smoke::LeftOutKind;
    match l.kind {
        LeftOutKind::JitModuleNotCompiled => format!(
            "; {} not proven, left out ({}): flashinfer's JIT module {} is not compiled, and its first use \
             compiles it, for far longer than the proof may run (flashinfer/fused_moe/core.py:213 in \
             flashinfer 0.6.8.post1); `kiln install flashinfer --aot-module cutlass_fused_moe` compiles it ahead of time \
             (a long compile: fused_moe_90 is 181 CUDA sources, an estimated 40 minutes on 16 cores)",
            l.backend, l.env, l.module
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::smoke::{LeftOut, LeftOutKind, Served, ServedRun};

    #[test]
    fn a_backend_left_out_is_named_with_its_module_and_the_fix() {
        let run = |left_out: Vec<LeftOut>| ServedRun {
            model: "moe: MixtralForCausalLM".into(),
            prompts: 4,
            tokens: 256,
            seconds: 2.0,
            tokens_per_s: 128.0,
            backends: [("moe".to_string(), "TRITON".to_string())].into(),
            start_seconds: 60.0,
            first_seconds: 0.0,
            left_out,
        };
        let served = |r| Served {
            engine: "vllm 0.20.0".into(),
            gpu: "NVIDIA H200".into(),
            runs: vec![r],
        };
        let arch: crate::arch::Arch = "9.0".parse().unwrap();
        let plain = served_text("serve/engine.py", &[arch], 99.0, &served(run(vec![])));
        assert_eq!(
            plain,
            "serving proof serve/engine.py: vllm 0.20.0 served on 9.0 (NVIDIA H200) — moe: MixtralForCausalLM: \
             256 tokens at 128.0 tokens/s (moe TRITON) (99.0 s)"
        );
        // A first, untimed request (kernels compiled on first use) is said apart from the rate.
        let first = ServedRun {
            first_seconds: 23.4,
            ..run(vec![])
        };
        assert!(
            served_text("serve/engine.py", &[arch], 99.0, &served(first))
                .contains("256 tokens at 128.0 tokens/s after a first request of 23.4 s (moe TRITON)"),
        );
        let l = LeftOut {
            backend: "FlashInfer CUTLASS".into(),
            kind: LeftOutKind::JitModuleNotCompiled,
            module: "fused_moe_90".into(),
            env: "VLLM_USE_FLASHINFER_MOE_FP16=0".into(),
            looked_in: vec![],
        };
        let text = served_text("serve/engine.py", &[arch], 99.0, &served(run(vec![l])));
        assert!(
            text.contains(
                "(moe TRITON); FlashInfer CUTLASS not proven, left out (VLLM_USE_FLASHINFER_MOE_FP16=0): \
                 flashinfer's JIT module fused_moe_90 is not compiled"
            ),
            "{text}"
        );
        assert!(
            text.contains("`kiln install flashinfer --aot-module cutlass_fused_moe`"),
            "{text}"
        );
    }
}
