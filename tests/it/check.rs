//! `kiln check`: serving command lines judged on the embedded recipes' version-scoped backend
//! facts, with model configs written from the published checkpoints (tests/fixtures/models,
//! its README names each source). The ground truth each case encodes is the upstream line cited
//! in the recipe fact it hits, quoted below.

use std::path::PathBuf;

use crate::common::{World, kiln_bare, stdout_json, text};

fn model(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/models")
        .join(name)
        .display()
        .to_string()
}

/// `kiln check [targets] --arch A --json -- cmd...` on the world's venv: (exit code, JSON).
fn check(w: &World, targets: &[&str], arch: &str, cmd: &str) -> (Option<i32>, serde_json::Value) {
    let out = kiln_bare()
        .arg("--python")
        .arg(&w.python)
        .arg("--cache-dir")
        .arg(&w.cache)
        .arg("check")
        .args(targets)
        .args(["--arch", arch, "--json", "--"])
        .args(cmd.split_whitespace())
        .output()
        .unwrap();
    (out.status.code(), stdout_json(&out))
}

/// A usage error (exit 2) whose message says `needle`.
fn usage_error(out: &std::process::Output, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "{err}");
}

fn verdict<'a>(v: &'a serde_json::Value, flag: &str, arch: &str) -> &'a serde_json::Value {
    v["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["flag"] == flag && x["arch"] == arch)
        .unwrap_or_else(|| panic!("no verdict for {flag} on {arch}: {v:#}"))
}

fn values(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["value"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_seed_case_and_its_neighbours() {
    let w = World::new();
    let glm = model("glm-5-nvfp4");
    let sglang = |m: &str, rest: &str| format!("python -m sglang.launch_server --model-path {m} {rest}");

    // GLM-5 NVFP4, SGLang 0.5.23, SM120, the CuTe DSL MoE backend: no. "grouped_gemm_nt_masked
    // asserts sm_100/sm_103/sm_107" (flashinfer/gemm/kernels/grouped_gemm_masked_blackwell.py:659-661).
    let cmd = sglang(
        &glm,
        "--moe-runner-backend flashinfer_cutedsl --quantization modelopt_fp4",
    );
    let (code, v) = check(&w, &["sglang==0.5.23"], "12.0", &cmd);
    assert_eq!(code, Some(1));
    assert_eq!(v["works"], false);
    assert_eq!(
        (v["engine"].as_str(), v["version"].as_str()),
        (Some("sglang"), Some("0.5.23"))
    );
    assert_eq!(v["archs"], serde_json::json!(["12.0"]));
    let moe = verdict(&v, "--moe-runner-backend", "12.0");
    assert_eq!(
        (moe["value"].as_str(), moe["chosen_by"].as_str()),
        (Some("flashinfer_cutedsl"), Some("user"))
    );
    assert_eq!(moe["works"], false);
    let first = &moe["reasons"][0];
    assert_eq!(first["kind"], "arch-not-served");
    assert!(
        first["source"].as_str().unwrap().contains("sm_100/sm_103/sm_107"),
        "{first}"
    );
    assert!(
        first["text"].as_str().unwrap().contains("do not run on 12.0"),
        "{first}"
    );
    assert!(
        values(moe, "alternatives").contains(&"flashinfer_cutlass".to_string()),
        "{moe}"
    );
    // Every verdict has the contract's fields.
    for x in v["verdicts"].as_array().unwrap() {
        for k in ["flag", "value", "chosen_by", "works", "reasons"] {
            assert!(x.get(k).is_some(), "{k} missing in {x}");
        }
        for r in x["reasons"].as_array().unwrap() {
            assert!(r["text"].is_string() && r.get("source").is_some(), "{r}");
        }
    }

    // The same on 10.0: the MoE verdict is not no (nothing is installed: not proven yet).
    let (_, v) = check(&w, &["sglang==0.5.23"], "10.0", &cmd);
    assert_ne!(verdict(&v, "--moe-runner-backend", "10.0")["works"], false);

    // A dense NVFP4 Llama with FA3 on SM120: no. "assert (major == 8 and not mla) or major == 9"
    // (python/sglang/srt/layers/attention/attention_registry.py:238-246).
    let (code, v) = check(
        &w,
        &["sglang==0.5.23"],
        "12.0",
        &sglang(&model("llama-3.1-8b-nvfp4"), "--attention-backend fa3"),
    );
    assert_eq!(code, Some(1));
    let att = verdict(&v, "--attention-backend", "12.0");
    assert_eq!(
        (att["value"].as_str(), att["works"].as_bool()),
        (Some("fa3"), Some(false))
    );
    assert!(values(att, "alternatives").contains(&"flashinfer".to_string()));
    // A dense model has no MoE verdict.
    assert!(v["verdicts"].as_array().unwrap().iter().all(|x| x["kind"] != "moe"));

    // vLLM 0.33.0, an NVFP4 MoE, `--moe-backend cutlass` on SM120: not no
    // (CutlassExpertsFp4 takes family 120: vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py:716-722).
    let (_, v) = check(
        &w,
        &["vllm==0.33.0"],
        "12.0",
        &format!("vllm serve {} --moe-backend cutlass", model("qwen3-30b-a3b-nvfp4")),
    );
    let moe = verdict(&v, "--moe-backend", "12.0");
    assert_ne!(moe["works"], false, "{moe:#}");
    assert_eq!(v["works"], serde_json::Value::Null);
    assert!(
        v["install"]
            .as_str()
            .unwrap()
            .starts_with("kiln install 'vllm==0.33.0'"),
        "{}",
        v["install"]
    );
    // ... but `triton` is refused for NVFP4 MoE (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py:163-183).
    let (_, v) = check(
        &w,
        &["vllm==0.33.0"],
        "12.0",
        &format!("vllm serve {} --moe-backend triton", model("qwen3-30b-a3b-nvfp4")),
    );
    assert_eq!(verdict(&v, "--moe-backend", "12.0")["works"], false);
}

#[test]
fn sglang_0_5_11_and_0_5_23_differ_where_upstream_does() {
    let w = World::new();
    let cmd = |m: &str, rest: &str| format!("python -m sglang.launch_server --model-path {} {rest}", model(m));
    // GLM-5 on SM120: 0.5.23 routes DSA to flashinfer_sparse_mla with an FP8 KV cache
    // (python/sglang/srt/arg_groups/overrides.py:637-675); 0.5.11 has only SM100 sparse MLA
    // defaults (`--nsa-*-backend trtllm`, python/sglang/srt/server_args.py:1617-1635).
    let (_, new) = check(
        &w,
        &["sglang==0.5.23"],
        "12.0",
        &cmd("glm-5-nvfp4", "--quantization modelopt_fp4"),
    );
    let (_, old) = check(
        &w,
        &["sglang==0.5.11"],
        "12.0",
        &cmd("glm-5-nvfp4", "--quantization modelopt_fp4"),
    );
    assert_eq!(new["version"], "0.5.23");
    assert_eq!(old["version"], "0.5.11");
    let kv = verdict(&new, "--kv-cache-dtype", "12.0");
    assert_eq!(kv["value"], "fp8_e4m3");
    let dsa = verdict(&new, "--dsa-decode-backend", "12.0");
    assert_eq!(dsa["value"], "flashinfer_sparse_mla");
    assert_ne!(dsa["works"], false);
    assert_ne!(new["works"], false, "{new:#}");
    let nsa = verdict(&old, "--nsa-decode-backend", "12.0");
    assert_eq!(
        (nsa["value"].as_str(), nsa["works"].as_bool()),
        (Some("trtllm"), Some(false))
    );
    assert_eq!(old["works"], false);

    // DeepGEMM for an FP8-block MoE on SM120: enabled in 0.5.23
    // (python/sglang/srt/layers/deep_gemm_wrapper/configurer.py:17-46), not in 0.5.11.
    let fp8 = cmd("qwen3-30b-a3b-fp8", "--moe-runner-backend deep_gemm");
    let (_, new) = check(&w, &["sglang==0.5.23"], "12.0", &fp8);
    let (_, old) = check(&w, &["sglang==0.5.11"], "12.0", &fp8);
    assert_ne!(verdict(&new, "--moe-runner-backend", "12.0")["works"], false);
    assert_eq!(verdict(&old, "--moe-runner-backend", "12.0")["works"], false);
}

#[test]
fn bad_command_lines_and_models_are_usage_errors() {
    let w = World::new();
    let run = |args: &[&str]| {
        kiln_bare()
            .arg("--python")
            .arg(&w.python)
            .arg("--cache-dir")
            .arg(&w.cache)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["check", "--arch", "12.0", "--", "python", "-m", "http.server"]);
    usage_error(&out, "does not start an engine kiln knows");
    let missing = w.dir.path().join("no-such-model");
    let out = run(&[
        "check",
        "--arch",
        "12.0",
        "--",
        "vllm",
        "serve",
        missing.to_str().unwrap(),
    ]);
    usage_error(&out, "not a local model directory with a config.json");
    let bad = w.dir.path().join("bad-model");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("config.json"), "{\"architectures\": [").unwrap();
    let out = run(&["check", "--arch", "12.0", "--", "vllm", "serve", bad.to_str().unwrap()]);
    usage_error(&out, "config.json: invalid JSON at line 1");
    let out = run(&["check", "--arch", "12.0"]);
    assert_eq!(out.status.code(), Some(2), "the command after -- is required");
    let llama = model("llama-3.1-8b");
    // A flag kiln has facts for, without its value: the engine's parser would refuse it too.
    let out = run(&[
        "check",
        "--arch",
        "12.0",
        "--",
        "vllm",
        "serve",
        &llama,
        "--attention-backend",
    ]);
    usage_error(&out, "`--attention-backend` needs a value");
    // A pin no recipe version fits: said, with the versions kiln offers.
    let out = run(&[
        "check",
        "sglang==0.4.0",
        "--arch",
        "12.0",
        "--",
        "sglang",
        "serve",
        "--model-path",
        &llama,
    ]);
    usage_error(&out, "kiln's recipes offer 0.5.23, 0.5.11");
    // No --arch and no GPU: nothing to judge for, said plainly.
    if which::which("nvidia-smi").is_err() {
        let out = run(&["check", "--", "vllm", "serve", &llama]);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains("no target arch"), "{}", text(&out.stderr));
    }
    // An environment variable no fact of this version reads is named as not judged
    // (vLLM 0.33.0 reads no VLLM_ATTENTION_BACKEND: it is absent from vllm/envs.py).
    let out = run(&[
        "check",
        "vllm==0.33.0",
        "--arch",
        "12.0",
        "--json",
        "--",
        "VLLM_ATTENTION_BACKEND=FLASHINFER",
        "vllm",
        "serve",
        &llama,
    ]);
    let v = stdout_json(&out);
    assert_eq!(v["unjudged_env"], serde_json::json!(["VLLM_ATTENTION_BACKEND"]), "{v}");
}

#[test]
fn the_installed_engine_speaks_first() {
    let w = World::new();
    // A stand-in SGLang 0.5.23 whose choices file lists a value kiln has no fact for.
    crate::common::stand_in(&w.python, w.dir.path(), "sglang", "0.5.23", "sglang", &[]);
    let site = w.site_packages();
    let choices = site.join("sglang/srt/arg_groups");
    std::fs::create_dir_all(&choices).unwrap();
    std::fs::write(
        choices.join("choices.py"),
        "MOE_RUNNER_BACKEND_CHOICES = [\n    \"auto\",\n    \"flashinfer_cutlass\",\n    \"flashinfer_cutedsl\",\n    \"humming\",\n]\n",
    )
    .unwrap();
    let cmd = |v: &str| {
        format!(
            "python -m sglang.launch_server --model-path {} --quantization modelopt_fp4 --moe-runner-backend {v}",
            model("glm-5-nvfp4")
        )
    };
    // The pin is ignored: the installed version speaks first.
    let (_, v) = check(&w, &["sglang==0.5.11"], "12.0", &cmd("humming"));
    assert_eq!(
        (v["version"].as_str(), v["version_from"].as_str()),
        (Some("0.5.23"), Some("installed"))
    );
    assert_eq!(v["choices"][0]["values"].as_array().unwrap().len(), 4);
    let moe = verdict(&v, "--moe-runner-backend", "12.0");
    assert_eq!(moe["works"], serde_json::Value::Null);
    assert_eq!(moe["reasons"][0]["kind"], "no-facts");
    assert!(moe["reasons"][0]["text"].as_str().unwrap().contains("humming"));
    // A value the installed engine does not list at all: no, naming the file.
    let (_, v) = check(&w, &[], "12.0", &cmd("marlin"));
    let moe = verdict(&v, "--moe-runner-backend", "12.0");
    assert_eq!(moe["works"], false);
    assert_eq!(moe["reasons"][0]["kind"], "not-a-choice");
    assert_eq!(
        moe["reasons"][0]["source"],
        "sglang/srt/arg_groups/choices.py:MOE_RUNNER_BACKEND_CHOICES"
    );
}

#[test]
fn check_and_doctor_output_snapshots() {
    let w = World::new();
    let human = |args: &[&str]| {
        let out = kiln_bare()
            .arg("--python")
            .arg(&w.python)
            .arg("--cache-dir")
            .arg(&w.cache)
            .args(args)
            .output()
            .unwrap();
        w.redact(&text(&out.stdout))
            .replace(env!("CARGO_MANIFEST_DIR"), "[REPO]")
    };
    let glm = model("glm-5-nvfp4");
    let cmd = [
        "check",
        "sglang==0.5.23",
        "--arch",
        "12.0",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        &glm,
        "--moe-runner-backend",
        "flashinfer_cutedsl",
    ];
    // The snapshots name the missing toolkit: taken only where none is found, as in CI.
    if which::which("nvcc").is_ok() || std::path::Path::new("/usr/local/cuda/bin/nvcc").exists() {
        return;
    }
    insta::assert_snapshot!("check_glm5_cutedsl_sm120", human(&cmd));
    let mut json_cmd = cmd.to_vec();
    json_cmd.insert(1, "--json");
    let v: serde_json::Value = serde_json::from_str(&human(&json_cmd)).unwrap();
    insta::assert_json_snapshot!("check_glm5_cutedsl_sm120_json", v["verdicts"]);
    // doctor's backends section only (the machine section differs from machine to machine).
    let doctor = human(&["doctor", "vllm", "--arch", "12.0"]);
    let start = doctor.find("\nbackends\n").expect("a backends section");
    let section = &doctor[start + 1..];
    let section = &section[..section.find("\n\n").unwrap_or(section.len())];
    insta::assert_snapshot!("doctor_vllm_backends_sm120", section);
}

#[test]
fn doctor_and_plan_json_carry_typed_reasons() {
    // Only where no toolkit is found, as in CI (the reasons name the missing toolkit).
    if which::which("nvcc").is_ok() || std::path::Path::new("/usr/local/cuda/bin/nvcc").exists() {
        return;
    }
    let w = World::new();
    let run = |args: &[&str]| {
        let out = kiln_bare()
            .arg("--python")
            .arg(&w.python)
            .arg("--cache-dir")
            .arg(&w.cache)
            .env("KILN_NO_PREBUILT", "1")
            .env("KILN_CPUS", "2")
            .args(args)
            .output()
            .unwrap();
        stdout_json(&out)
    };
    // doctor --json: the backends of the planned SGLang on 12.0, typed, with their words.
    let v = run(&["doctor", "sglang", "--arch", "12.0", "--json"]);
    let backends: Vec<serde_json::Value> = v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["kind"] == "moe")
        .map(|b| {
            serde_json::json!({
                "value": b["value"], "version": b["version"], "works": b["works"],
                "serves": b["serves"], "refuses": b["refuses"],
                "reasons": b["reasons"].as_array().unwrap().iter()
                    .map(|r| serde_json::json!({"kind": r["kind"], "text": r["text"]})).collect::<Vec<_>>(),
            })
        })
        .collect();
    insta::assert_json_snapshot!("doctor_sglang_moe_backends_json", backends);
    // plan --json: each step's action and typed reasons.
    let v = run(&["plan", "sglang", "--arch", "12.0", "--json"]);
    let steps: Vec<serde_json::Value> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let kinds: Vec<&serde_json::Value> = s["reasons"].as_array().unwrap().iter().map(|r| &r["kind"]).collect();
            serde_json::json!({"name": s["name"], "action": s["action"], "reason_kinds": kinds,
                "reason": w.redact(s["reason"].as_str().unwrap_or_default())})
        })
        .collect();
    insta::assert_json_snapshot!("plan_sglang_steps_json", steps);
}

/// An unquantized (bf16) MoE model on vLLM 0.20.0: `auto` is FlashInfer CUTLASS on 9.0 and on
/// 12.0 ("Using FlashInfer CUTLASS Unquantized MoE backend out of potential backends:
/// ['FlashInfer TRTLLM', 'FlashInfer CUTLASS', 'TRITON', 'BATCHED_TRITON']", logged by
/// vllm/model_executor/layers/fused_moe/oracle/unquantized.py:286 on the H200), whose fused MoE
/// module flashinfer compiles at first use: the verdict says it is not compiled yet, rather than
/// leaving the engine's first request to find out.
#[test]
fn vllm_0_20_0_unquantized_moe_goes_to_flashinfer_cutlass_and_its_jit() {
    let w = World::new();
    let cmd = format!("vllm serve {}", model("qwen3-30b-a3b"));
    for arch in ["9.0", "12.0"] {
        let (_, v) = check(&w, &["vllm==0.20.0"], arch, &cmd);
        let moe = verdict(&v, "--moe-backend", arch);
        assert_eq!(
            (moe["value"].as_str(), moe["chosen_by"].as_str()),
            (Some("flashinfer_cutlass"), Some("auto")),
            "{moe:#}"
        );
        let reasons = moe["reasons"].as_array().unwrap();
        let auto = reasons.iter().find(|r| r["kind"] == "auto-chose").unwrap();
        assert!(
            auto["source"].as_str().unwrap().contains("oracle/unquantized.py:66-72"),
            "{auto}"
        );
        let jit = reasons
            .iter()
            .find(|r| r["kind"] == "jit-not-proven")
            .unwrap_or_else(|| panic!("{moe:#}"));
        assert_eq!(
            (jit["component"].as_str(), jit["kernel"].as_str(), jit["arch"].as_str()),
            (Some("flashinfer"), Some("cutlass_fused_moe"), Some(arch))
        );
    }
    // Block FP8 of the same model keeps its own rule: Triton on 12.0 in 0.20.0.
    let (_, v) = check(
        &w,
        &["vllm==0.20.0"],
        "12.0",
        &format!("vllm serve {}", model("qwen3-30b-a3b-fp8")),
    );
    assert_eq!(verdict(&v, "--moe-backend", "12.0")["value"], "triton");
}
