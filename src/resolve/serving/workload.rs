//! What a model asks of the serving backends: its weight scheme, the KV cache quantization its
//! checkpoint carries, and its families (MoE, latent or sparse attention, sliding window), each
//! with the config field that decided it. It reads a [`ModelConfig`] only; how the engine
//! resolves `auto` from these is [`super::auto`]'s.

use serde::Serialize;
use serde_json::Value;

use crate::probe::model::ModelConfig;
use crate::recipe::serving::{Family, KvDtype, Quant};

/// A model, as the backends see it.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// The first of `architectures` (`GlmMoeDsaForCausalLM`).
    pub architecture: Option<String>,
    pub quant: Quant,
    /// The config field that decided `quant`.
    pub quant_from: String,
    /// The KV cache quantization the checkpoint carries scales for, if any.
    pub checkpoint_kv: Option<KvDtype>,
    pub families: Vec<Family>,
    /// The config fields that decided `families`.
    pub families_from: Vec<String>,
}

impl Workload {
    pub fn is(&self, f: Family) -> bool {
        self.families.contains(&f)
    }
    /// The dtype of unquantized activations (and of an `auto` KV cache without quantization).
    pub fn activation_kv(&self) -> KvDtype {
        if self.quant == Quant::Fp16 {
            KvDtype::Fp16
        } else {
            KvDtype::Bf16
        }
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(|s| s.to_ascii_lowercase())
}

/// The scheme of a compressed-tensors checkpoint, from its first config group.
fn compressed_tensors(q: &Value) -> Option<Quant> {
    let group = q.get("config_groups")?.as_object()?.values().next()?;
    let w = group.get("weights")?;
    let bits = w.get("num_bits").and_then(Value::as_u64)?;
    let float = text(w.get("type")).as_deref() == Some("float");
    let acts = group.get("input_activations").filter(|a| !a.is_null());
    let act_bits = acts.and_then(|a| a.get("num_bits")).and_then(Value::as_u64);
    Some(match (bits, float, act_bits) {
        (4, true, Some(4)) => Quant::Nvfp4,
        (4, true, _) => Quant::Nvfp4W4a16,
        (4, false, _) => Quant::Int4W4a16,
        (8, true, _) if text(w.get("strategy")).as_deref() == Some("block") => Quant::Fp8Block,
        (8, true, _) => Quant::Fp8,
        _ => return None,
    })
}

/// The weight scheme and the field that says so; `Err` names a scheme kiln has no word for.
fn quant_of(m: &ModelConfig) -> Result<(Quant, String), String> {
    if let Some(h) = &m.hf_quant {
        match text(h.get("quant_algo")).as_deref() {
            Some("nvfp4") => return Ok((Quant::Nvfp4, "hf_quant_config.json quant_algo NVFP4".into())),
            Some("fp8") => return Ok((Quant::Fp8, "hf_quant_config.json quant_algo FP8".into())),
            Some("w4a16_awq") | Some("int4_awq") => {
                return Ok((Quant::Int4W4a16, "hf_quant_config.json quant_algo".into()));
            }
            Some(other) => return Err(format!("hf_quant_config.json quant_algo `{other}`")),
            None => {}
        }
    }
    if let Some(q) = &m.quantization_config {
        let method = text(q.get("quant_method")).unwrap_or_default();
        let from = format!("config.json quantization_config.quant_method `{method}`");
        let algo = text(q.get("quant_algo"));
        return match method.as_str() {
            "modelopt_fp4" => Ok((Quant::Nvfp4, from)),
            "modelopt" if algo.as_deref() == Some("nvfp4") => Ok((Quant::Nvfp4, format!("{from}, quant_algo NVFP4"))),
            "modelopt" if algo.as_deref() == Some("fp8") => Ok((Quant::Fp8, format!("{from}, quant_algo FP8"))),
            "fp8" if q.get("weight_block_size").is_some_and(|b| !b.is_null()) => {
                Ok((Quant::Fp8Block, format!("{from} with weight_block_size")))
            }
            "fp8" => Ok((Quant::Fp8, from)),
            "mxfp4" => Ok((Quant::Mxfp4, from)),
            "awq" | "gptq" | "awq_marlin" | "gptq_marlin" => Ok((Quant::Int4W4a16, from)),
            "compressed-tensors" => compressed_tensors(q)
                .map(|x| (x, format!("{from} config_groups")))
                .ok_or_else(|| format!("{from} with a scheme kiln does not know")),
            _ => Err(from),
        };
    }
    match m.dtype.as_deref() {
        Some("float16") => Ok((Quant::Fp16, "config.json torch_dtype float16".into())),
        Some(d) => Ok((Quant::Bf16, format!("config.json torch_dtype {d}"))),
        None => Ok((Quant::Bf16, "no quantization_config and no torch_dtype".into())),
    }
}

/// The KV cache quantization a checkpoint carries.
fn checkpoint_kv(m: &ModelConfig) -> Option<KvDtype> {
    let from_hf = m.hf_quant.as_ref().and_then(|h| text(h.get("kv_cache_quant_algo")));
    let from_cfg = m.quantization_config.as_ref().and_then(|q| {
        text(q.get("kv_cache_quant_algo")).or_else(|| text(q.get("kv_cache_scheme").and_then(|s| s.get("type"))))
    });
    match from_hf.or(from_cfg).as_deref() {
        Some("fp8") | Some("float") => Some(KvDtype::Fp8E4m3),
        _ => None,
    }
}

/// Architectures that use DeepSeek sparse attention (DSA).
const DSA_ARCHITECTURES: &[&str] = &["GlmMoeDsaForCausalLM", "DeepseekV32ForCausalLM"];

/// The workload of a model; `Err` when its quantization scheme is one kiln cannot name (then no
/// verdict that depends on it would be honest).
pub fn of(m: &ModelConfig) -> Result<Workload, String> {
    let (quant, quant_from) = quant_of(m).map_err(|what| format!("{what}: not a scheme kiln judges"))?;
    let arch = m.architectures.first().cloned();
    let mut families = Vec::new();
    let mut from = Vec::new();
    let dsa_arch = m.architectures.iter().any(|a| DSA_ARCHITECTURES.contains(&a.as_str()));
    if dsa_arch || m.index_topk.is_some() {
        families.push(Family::Dsa);
        from.push(if dsa_arch {
            format!("architectures {}", arch.as_deref().unwrap_or(""))
        } else {
            "index_topk".into()
        });
    }
    if m.kv_lora_rank.is_some() || families.contains(&Family::Dsa) {
        families.push(Family::Mla);
        from.push("kv_lora_rank".into());
    } else {
        families.push(Family::Mha);
    }
    if let Some(n) = m.experts {
        families.push(Family::Moe);
        from.push(format!("{n} routed experts"));
    }
    if m.sliding_window.is_some() {
        families.push(Family::SlidingWindow);
        from.push("sliding_window".into());
    }
    Ok(Workload {
        architecture: arch,
        quant,
        quant_from,
        checkpoint_kv: checkpoint_kv(m),
        families,
        families_from: from,
    })
}
