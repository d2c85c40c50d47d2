//! Unit tests of the serving judge on the embedded recipes: command lines, workloads from
//! configs written as published checkpoints have them, `auto`, and the verdicts of the seed case.

use std::collections::BTreeMap;

use super::cmdline::{self, CmdlineError};
use super::workload;
use crate::probe::model::ModelConfig;
use crate::recipe::RecipeSet;
use crate::recipe::serving::{Family, KvDtype, Quant, Selector};

fn argv(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

#[test]
fn command_lines_of_both_engines() {
    let set = RecipeSet::embedded().unwrap();
    let c = cmdline::parse(
        &set,
        &argv("SGLANG_X=1 python3 -m sglang.launch_server --model-path /m/glm --moe-runner-backend=flashinfer_cutedsl --tp 8"),
    )
    .unwrap();
    assert_eq!(c.engine, "sglang");
    assert_eq!(c.model.as_deref(), Some("/m/glm"));
    assert_eq!(
        c.values[&Selector::Flag("--moe-runner-backend".into())],
        "flashinfer_cutedsl"
    );
    assert_eq!(c.values[&Selector::Flag("--tp".into())], "8");
    assert_eq!(c.values[&Selector::Env("SGLANG_X".into())], "1");

    let c = cmdline::parse(&set, &argv("sglang serve --model /m/x --enable-foo")).unwrap();
    assert_eq!(c.engine, "sglang");
    assert_eq!(c.values[&Selector::Flag("--enable-foo".into())], "true");

    let c = cmdline::parse(
        &set,
        &argv("VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve /m/qwen --moe-backend cutlass --kv-cache-dtype fp8"),
    )
    .unwrap();
    assert_eq!(c.engine, "vllm");
    assert_eq!(c.model.as_deref(), Some("/m/qwen"));
    assert_eq!(c.values[&Selector::Env("VLLM_ATTENTION_BACKEND".into())], "FLASHINFER");
    assert_eq!(c.values[&Selector::Flag("--kv-cache-dtype".into())], "fp8");

    assert_eq!(cmdline::parse(&set, &[]).unwrap_err(), CmdlineError::Empty);
    assert_eq!(
        cmdline::parse(&set, &argv("vllm serve /m/x --attention-backend --kv-cache-dtype fp8")).unwrap_err(),
        CmdlineError::MissingValue("--attention-backend".into())
    );
    assert_eq!(
        cmdline::parse(&set, &argv("python -m sglang.launch_server --model-path")).unwrap_err(),
        CmdlineError::MissingValue("--model-path".into())
    );
    assert!(matches!(
        cmdline::parse(&set, &argv("python -m http.server")).unwrap_err(),
        CmdlineError::UnknownEngine(..)
    ));
    assert!(matches!(
        cmdline::parse(&set, &argv("vllm serve --moe-backend cutlass")).unwrap_err(),
        CmdlineError::NoModel(..)
    ));
}

fn config(json: serde_json::Value, hf_quant: Option<serde_json::Value>) -> ModelConfig {
    let get = |k: &str| json.get(k).and_then(|v| v.as_u64());
    ModelConfig {
        architectures: json["architectures"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
            .unwrap_or_default(),
        dtype: json["torch_dtype"].as_str().map(str::to_string),
        quantization_config: json.get("quantization_config").cloned(),
        hf_quant,
        experts: get("n_routed_experts")
            .or(get("num_experts"))
            .or(get("num_local_experts")),
        kv_lora_rank: get("kv_lora_rank"),
        index_topk: get("index_topk"),
        sliding_window: get("sliding_window"),
        ..ModelConfig::default()
    }
}

#[test]
fn workloads_of_published_checkpoint_shapes() {
    // GLM-5 NVFP4: ModelOpt writes the scheme to hf_quant_config.json.
    let glm = config(
        serde_json::json!({"architectures": ["GlmMoeDsaForCausalLM"], "torch_dtype": "bfloat16",
            "n_routed_experts": 256, "kv_lora_rank": 512, "index_topk": 2048}),
        Some(serde_json::json!({"quant_algo": "NVFP4", "kv_cache_quant_algo": null})),
    );
    let w = workload::of(&glm).unwrap();
    assert_eq!(w.quant, Quant::Nvfp4);
    assert_eq!(w.families, vec![Family::Dsa, Family::Mla, Family::Moe]);
    assert_eq!(w.checkpoint_kv, None);

    let fp8 = config(
        serde_json::json!({"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 128,
            "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}),
        None,
    );
    let w = workload::of(&fp8).unwrap();
    assert_eq!(w.quant, Quant::Fp8Block);
    assert_eq!(w.families, vec![Family::Mha, Family::Moe]);

    let ct = config(
        serde_json::json!({"architectures": ["LlamaForCausalLM"], "quantization_config": {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float"}, "input_activations": null}},
            "kv_cache_scheme": {"type": "float", "num_bits": 8}}}),
        None,
    );
    let w = workload::of(&ct).unwrap();
    assert_eq!(w.quant, Quant::Nvfp4W4a16);
    assert_eq!(w.checkpoint_kv, Some(KvDtype::Fp8E4m3));

    let gpt = config(
        serde_json::json!({"architectures": ["GptOssForCausalLM"], "num_local_experts": 32, "sliding_window": 128,
            "quantization_config": {"quant_method": "mxfp4"}}),
        None,
    );
    let w = workload::of(&gpt).unwrap();
    assert_eq!(w.quant, Quant::Mxfp4);
    assert!(w.is(Family::SlidingWindow) && w.is(Family::Moe));

    let dense = config(
        serde_json::json!({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}),
        None,
    );
    assert_eq!(workload::of(&dense).unwrap().quant, Quant::Bf16);

    let odd = config(
        serde_json::json!({"architectures": ["X"], "quantization_config": {"quant_method": "bitsandbytes"}}),
        None,
    );
    let e = workload::of(&odd).unwrap_err();
    assert!(
        e.contains("bitsandbytes") && e.contains("not a scheme kiln judges"),
        "{e}"
    );
    let _ = BTreeMap::<u8, u8>::new();
}
