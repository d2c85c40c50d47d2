//! A model checkpoint's configuration, read from a local directory: `config.json` and, where the
//! checkpoint has one, ModelOpt's `hf_quant_config.json` — the fields that decide which serving
//! backends can run it (architecture, dtype, quantization, KV cache quantization, experts, latent
//! and sparse attention, sliding window). It reads files only: no hub download, no weights, and
//! it does not judge what the fields mean ([`crate::resolve::serving::workload`] does).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// The fields of a checkpoint's configuration that serving backends depend on.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModelConfig {
    pub dir: PathBuf,
    pub architectures: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_type: Option<String>,
    /// `torch_dtype` (or `dtype`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// `quantization_config`, as written (`None` for an unquantized checkpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization_config: Option<Value>,
    /// `hf_quant_config.json`'s `quantization` table (ModelOpt checkpoints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hf_quant: Option<Value>,
    /// Routed experts: `n_routed_experts`, `num_experts` or `num_local_experts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experts: Option<u64>,
    /// `kv_lora_rank` (latent attention).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_lora_rank: Option<u64>,
    /// `index_topk` (DeepSeek sparse attention's indexer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_topk: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u64>,
}

/// Why a model directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(
        "{0} is not a local model directory with a config.json (kiln reads models from disk only; download the checkpoint's config.json first)"
    )]
    NoConfig(PathBuf),
    #[error("{path}: {message}")]
    Bad { path: PathBuf, message: String },
}

/// Largest config file kiln reads (real ones are a few KiB).
const MAX_BYTES: u64 = 4 << 20;

fn read_json(path: &Path) -> Result<Option<Value>, ModelError> {
    let bad = |message: String| ModelError::Bad {
        path: path.to_path_buf(),
        message,
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if meta.len() > MAX_BYTES {
        return Err(bad(format!("{} bytes, more than a model config can be", meta.len())));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| bad(format!("invalid JSON at line {} column {}: {e}", e.line(), e.column())))
}

fn number(v: &Value, keys: &[&str]) -> Option<u64> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_u64).filter(|n| *n > 0))
}

/// Reads `dir/config.json` (and `dir/hf_quant_config.json` when present). Multimodal configs
/// keep the language model's fields under `text_config`; those are read when the top level
/// lacks them.
pub fn read(dir: &Path) -> Result<ModelConfig, ModelError> {
    let config_path = dir.join("config.json");
    let Some(config) = read_json(&config_path)? else {
        return Err(ModelError::NoConfig(dir.to_path_buf()));
    };
    if !config.is_object() {
        return Err(ModelError::Bad {
            path: config_path,
            message: "not a JSON object".into(),
        });
    }
    let text = config.get("text_config").filter(|t| t.is_object());
    let field = |keys: &[&str]| number(&config, keys).or_else(|| text.and_then(|t| number(t, keys)));
    let hf_quant = read_json(&dir.join("hf_quant_config.json"))?.and_then(|v| v.get("quantization").cloned());
    let use_sliding = config.get("use_sliding_window").and_then(Value::as_bool) != Some(false);
    Ok(ModelConfig {
        dir: dir.to_path_buf(),
        architectures: config
            .get("architectures")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default(),
        model_type: config.get("model_type").and_then(Value::as_str).map(str::to_string),
        dtype: ["torch_dtype", "dtype"]
            .iter()
            .find_map(|k| config.get(*k).and_then(Value::as_str).map(str::to_string)),
        quantization_config: config.get("quantization_config").filter(|v| v.is_object()).cloned(),
        hf_quant,
        experts: field(&["n_routed_experts", "num_experts", "num_local_experts"]),
        kv_lora_rank: field(&["kv_lora_rank"]),
        index_topk: field(&["index_topk"]),
        sliding_window: field(&["sliding_window"]).filter(|_| use_sliding),
    })
}
