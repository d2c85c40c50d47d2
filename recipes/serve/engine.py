# kiln serving proof for SGLang and vLLM (`[verify] serve`): the real engine serves tokens on
# this GPU. Nothing is downloaded: a tokenizer and two tiny random-weight models are written on
# the spot in the Hugging Face layout the engines load (config.json, model.safetensors,
# tokenizer.json), one dense (LlamaForCausalLM) and one mixture-of-experts
# (MixtralForCausalLM, through the engine's default MoE backend, save one whose kernels would
# first compile for far longer than the proof may run: then the proof says which it left out and
# why, in `left_out`). Each is started with the
# engine's own entry point (SGLang `Engine`, vLLM `LLM`), asked for greedy completions, and
# timed; the backends the engine chose are read from the engine itself.
#
# kiln runs it as `python -I -B engine.py` with KILN_COMPONENT naming the engine (sglang or
# vllm); it prints one line `kiln-serve: {json}` that kiln keeps as the evidence.
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

VOCAB = 1024
HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 512, 2, 4, 2, 64
EXPERTS, TOP_K = 8, 2
PROMPTS, NEW_TOKENS = 8, 32


def write_tokenizer(d):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    special = ["<unk>", "<s>", "</s>", "<pad>"]
    vocab = {t: i for i, t in enumerate(special)}
    for i in range(VOCAB - len(special)):
        vocab[f"w{i}"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "model_max_length": 1024,
                "add_bos_token": False,
            },
            f,
        )


def write_model(d, moe):
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)

    def ones(n):
        return torch.ones(n, dtype=torch.bfloat16)

    w = {"model.embed_tokens.weight": rand(VOCAB, HIDDEN), "model.norm.weight": ones(HIDDEN)}
    w["lm_head.weight"] = rand(VOCAB, HIDDEN)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = ones(HIDDEN)
        w[p + "post_attention_layernorm.weight"] = ones(HIDDEN)
        w[p + "self_attn.q_proj.weight"] = rand(HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.k_proj.weight"] = rand(KV_HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.v_proj.weight"] = rand(KV_HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.o_proj.weight"] = rand(HIDDEN, HEADS * HEAD_DIM)
        if moe:
            w[p + "block_sparse_moe.gate.weight"] = rand(EXPERTS, HIDDEN)
            for e in range(EXPERTS):
                x = f"{p}block_sparse_moe.experts.{e}."
                w[x + "w1.weight"] = rand(INTER, HIDDEN)
                w[x + "w3.weight"] = rand(INTER, HIDDEN)
                w[x + "w2.weight"] = rand(HIDDEN, INTER)
        else:
            w[p + "mlp.gate_proj.weight"] = rand(INTER, HIDDEN)
            w[p + "mlp.up_proj.weight"] = rand(INTER, HIDDEN)
            w[p + "mlp.down_proj.weight"] = rand(HIDDEN, INTER)
    save_file(w, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["MixtralForCausalLM" if moe else "LlamaForCausalLM"],
        "model_type": "mixtral" if moe else "llama",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
        "torch_dtype": "bfloat16",
    }
    if moe:
        config.update(num_local_experts=EXPERTS, num_experts_per_tok=TOP_K, sliding_window=None)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)


def model_dir(root, moe):
    d = os.path.join(root, "moe" if moe else "dense")
    os.makedirs(d, exist_ok=True)
    write_tokenizer(d)
    write_model(d, moe)
    return d


def prompts():
    return [" ".join(f"w{(7 * p + i) % 900}" for i in range(12)) for p in range(PROMPTS)]


def describe(moe):
    if moe:
        return f"moe: MixtralForCausalLM, {LAYERS} layers, {EXPERTS} experts top-{TOP_K}, random weights"
    return f"dense: LlamaForCausalLM, {LAYERS} layers, random weights"


def serve_sglang(root):
    import sglang

    runs = []
    for moe in (False, True):
        d = model_dir(root, moe)
        t0 = time.time()
        engine = sglang.Engine(
            model_path=d,
            dtype="bfloat16",
            mem_fraction_static=0.25,
            cuda_graph_max_bs=PROMPTS,
            random_seed=0,
            log_level="warning",
            # SGLang 0.5.11's piecewise CUDA graph (sglang/srt/compilation/cuda_piecewise_backend.py)
            # failed on the H200 with CUBLAS_STATUS_EXECUTION_FAILED in its torch.compile'd graph;
            # plain CUDA graphs serve (docs/gpu-proof.md §9).
            disable_piecewise_cuda_graph=True,
        )
        started = time.time() - t0
        try:
            first = timed_first(lambda: engine.generate(prompts(), {"max_new_tokens": 4, "temperature": 0.0}))
            t1 = time.time()
            outs = engine.generate(
                prompts(), {"max_new_tokens": NEW_TOKENS, "temperature": 0.0, "ignore_eos": True}
            )
            seconds = time.time() - t1
            tokens = sum(o["meta_info"]["completion_tokens"] for o in outs)
            # The scheduler's own arguments, after it resolved them
            # (sglang/srt/entrypoints/engine.py:869 get_server_info,
            # sglang/srt/managers/scheduler.py:3370 get_internal_state).
            info = engine.get_server_info()
            states = info.get("internal_states") or [{}]
            state = states[0] if isinstance(states, list) else states
            keys = ["attention_backend", "sampling_backend"] + (["moe_runner_backend"] if moe else [])
            backends = {k.replace("_backend", ""): str(state.get(k, info.get(k))) for k in keys}
        finally:
            engine.shutdown()
        runs.append(run(moe, tokens, seconds, started, backends, outs[0]["text"], first))
    return f"sglang {sglang.__version__}", runs


class Chosen:
    """What vLLM logs about the backends it picked: vllm/platforms/cuda.py:369 (0.20.0) "Using %s
    attention backend out of potential backends: %s." (or :308 "Using %s backend." when asked for
    one) and vllm/model_executor/layers/fused_moe/oracle/unquantized.py:286 "Using ... Unquantized
    MoE backend out of ...", each logged once per process (`info_once`): one model per process."""

    def __init__(self):
        import logging

        self.seen = {}
        outer = self

        class Handler(logging.Handler):
            def emit(self, record):
                msg = record.getMessage()
                if " MoE backend" in msg:
                    outer.seen["moe"] = msg.split(" MoE backend")[0].replace("Using ", "", 1).strip("'")
                elif msg.startswith("Using ") and " attention backend out of" in msg:
                    outer.seen["attention"] = msg[len("Using ") :].split(" attention backend")[0]
                elif msg.startswith("Using ") and msg.rstrip(".").endswith(" backend") and "vit" not in msg:
                    outer.seen.setdefault("attention", msg[len("Using ") :].rstrip(".")[: -len(" backend")])

        self.handler = Handler(level=logging.DEBUG)
        logging.getLogger("vllm").addHandler(self.handler)


RUN_PREFIX = "kiln-serve-run: "
# One model's start, compile and generation: 41-53 s for the dense model on the H200 (0.20.0); a
# margin, not a measurement, so that a hang is reported with time left in kiln's own limit.
MODEL_LIMIT = 280
# How long a child that printed its result gets to leave before its session is killed: with
# `os._exit` it still stayed for minutes once on the H200 (docs/gpu-proof.md §13).
EXIT_GRACE = 15


def run_child(argv, env, log):
    """Runs one model's child in its own session, its output to the file `log` (not a pipe: what
    the engine starts, torch.compile's workers, may outlive it holding a pipe open). Returns its
    exit code, 0 where it printed its result and then did not leave within EXIT_GRACE (its whole
    session is then killed: what it measured is in `log`), or why it did not serve."""
    import signal
    import subprocess

    with open(log, "w") as f:
        child = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.time()
    served_at = None
    code = None
    try:
        while code is None:
            code = child.poll()
            if code is not None:
                break
            now = time.time()
            if served_at is None:
                with open(log, errors="replace") as f:
                    if RUN_PREFIX in f.read():
                        served_at = now
            elif now - served_at > EXIT_GRACE:
                print(f"kiln: the child served, then did not leave within {EXIT_GRACE} s: killed", flush=True)
                code = 0
            if code is None and now - t0 > MODEL_LIMIT:
                code = f"nothing within {MODEL_LIMIT} s (killed{session_at_limit(child.pid)})"
            time.sleep(0.5)
    finally:
        # Whatever the child left in its session (the engine's workers, a compile) goes with it,
        # in its process group or in another of the session.
        for pid in [child.pid] + [p for p, _ in session_members(child.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            print("kiln: the killed child was not reaped within 60 s", flush=True)
    print(f"kiln: the child ran {time.time() - t0:.1f} s", flush=True)
    return code


def session_members(sid):
    """The processes of session `sid` as (pid, argv), read from /proc (proc(5): field 6 of
    /proc/PID/stat is the session)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) != sid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except (OSError, IndexError, ValueError):
            continue
        out.append((int(pid), argv))
    return out


def session_at_limit(sid):
    """What the session `sid` was running besides Python: a child killed at the limit may have
    been compiling, as vLLM 0.20.0's default unquantized MoE backend on the H200, FlashInfer
    CUTLASS, was with flashinfer's JIT (`ninja -C <cache>/cached_ops/fused_moe_90`,
    flashinfer/fused_moe/core.py:213)."""
    seen = {}
    for _, argv in session_members(sid):
        if not argv or "python" in os.path.basename(argv[0]):
            continue
        name = os.path.basename(argv[0])
        if name == "ninja" and "-C" in argv[:-1]:
            name = f"ninja -C {argv[argv.index('-C') + 1]}"
        seen[name] = seen.get(name, 0) + 1
    if not seen:
        return ""
    return "; its session was running " + ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(seen.items()))


def serve_vllm(root):
    # One process per model: vLLM's engine core runs in the calling process here (so that what it
    # logs is seen), and the parallel state it sets up for the first model stays for the life of
    # the process: a second LLM for an MoE model then fails, "expert parallel group is not
    # initialized" (vllm/distributed/parallel_state.py:1257, 0.20.0).
    import vllm

    runs = []
    for moe in (False, True):
        env = dict(os.environ, KILN_SERVE_VLLM_MODEL=model_dir(root, moe), KILN_SERVE_MOE="1" if moe else "")
        left_out = flashinfer_moe_left_out() if moe and SETTING not in os.environ else []
        if left_out:
            env[SETTING] = "0"
        log = os.path.join(root, ("moe" if moe else "dense") + ".log")
        code = run_child([sys.executable, "-I", "-B", os.path.abspath(__file__)], env, log)
        with open(log, errors="replace") as f:
            text = f.read()
        sys.stdout.write(text)
        sys.stdout.flush()
        lines = [l for l in text.splitlines() if l.startswith(RUN_PREFIX)]
        if code != 0 or not lines:
            sys.exit(f"vllm: {describe(moe)} exited {code} without serving (its output is above)")
        r = json.loads(lines[-1][len(RUN_PREFIX) :])
        if left_out:
            r["left_out"] = left_out
        runs.append(r)
    return f"vllm {vllm.__version__}", runs


# flashinfer's fused MoE JIT module per compute capability, as flashinfer names it
# (flashinfer/fused_moe/core.py:205-217 and :763, flashinfer/jit/fused_moe.py:161, 0.6.8.post1),
# where vLLM's FlashInfer CUTLASS MoE runs at all: 9.0 and the 10.x, 11.x and 12.x families
# (FlashInferExperts._supports_current_device, vllm/model_executor/layers/fused_moe/
# flashinfer_cutlass_moe.py:125-136 in 0.20.0; later releases drop 11.x, flashinfer-ai/flashinfer#3134).
FUSED_MOE_MODULE = {120: "120", 121: "120", 110: "100", 103: "103", 100: "100", 90: "90"}
SETTING = "VLLM_USE_FLASHINFER_MOE_FP16"


def flashinfer_moe_left_out():
    """FlashInfer's MoE backends to leave out of vLLM's choice, as typed records: vLLM 0.20.0 puts
    FlashInfer CUTLASS first for unquantized MoE where flashinfer is installed
    (vllm/model_executor/layers/fused_moe/oracle/unquantized.py:63-71), and its kernels are
    flashinfer's JIT module fused_moe_<sm>, compiled at first use (flashinfer/fused_moe/core.py:213):
    181 CUDA sources for sm_90, 34 of them compiled after 450 s of 15 nvcc on the H200. Where that
    module is neither ahead-of-time compiled nor in flashinfer's JIT cache (the paths of
    flashinfer/jit/core.py:237-261), the proof serves with VLLM_USE_FLASHINFER_MOE_FP16=0
    (oracle/unquantized.py:229-234; only a vLLM that reads that setting, vllm/envs.py:1298 in
    0.20.0) and says so; where it is compiled, vLLM chooses as it would."""
    try:
        import torch
        import vllm.envs
        from flashinfer.jit import env as jit_env

        if SETTING not in vllm.envs.environment_variables:
            return []  # a vLLM without the setting (vllm/envs.py) chooses otherwise
        major, minor = torch.cuda.get_device_capability()
    except Exception:
        return []
    arch = FUSED_MOE_MODULE.get(major * 10 + minor)
    if arch is None:
        return []
    name = f"fused_moe_{arch}"
    so = [jit_env.FLASHINFER_AOT_DIR / name / f"{name}.so", jit_env.FLASHINFER_JIT_DIR / name / f"{name}.so"]
    if any(p.exists() for p in so):
        return []
    return [
        {
            "backend": "FlashInfer CUTLASS",
            "kind": "jit-module-not-compiled",
            "module": name,
            "env": f"{SETTING}=0",
            "looked_in": [str(p) for p in so],
        }
    ]


def serve_vllm_one(d, moe):
    # The engine core in this process, so that what it logs is seen here.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm import LLM, SamplingParams

    chosen = Chosen()
    t0 = time.time()
    llm = LLM(
        model=d,
        dtype="bfloat16",
        gpu_memory_utilization=0.25,
        max_model_len=512,
        max_num_seqs=PROMPTS,
        seed=0,
        compilation_config={"cudagraph_capture_sizes": [1, 2, 4, 8]},
    )
    started = time.time() - t0
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)
    first = timed_first(lambda: llm.generate(prompts(), SamplingParams(max_tokens=4, temperature=0.0)))
    t1 = time.time()
    outs = llm.generate(prompts(), params)
    seconds = time.time() - t1
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    r = run(moe, tokens, seconds, started, dict(chosen.seen), outs[0].outputs[0].text, first)
    print(RUN_PREFIX + json.dumps(r), flush=True)
    sys.stderr.flush()
    # vLLM's in-process engine leaves threads and its process group behind, and the interpreter
    # then never exits (seen on the H200 with 0.20.0): what it measured is printed, so leave now.
    os._exit(0)


def timed_first(generate):
    """Seconds of a first, untimed request (the same prompts, 4 tokens each, so the same batch
    shapes): kernels an engine compiles on first use land here, not in the rate. On a cold flashinfer JIT cache SGLang's dense model
    reported 10.8 tokens/s on the H200 with this inside the timed call (docs/gpu-proof.md §16)."""
    t = time.time()
    generate()
    return time.time() - t


def run(moe, tokens, seconds, started, backends, text, first):
    print(
        f"{describe(moe)}: first request {first:.2f} s; {tokens} tokens in {seconds:.2f} s; "
        f"first completion: {text[:80]!r}",
        flush=True,
    )
    return {
        "model": describe(moe),
        "prompts": PROMPTS,
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1) if seconds > 0 else 0.0,
        "backends": backends,
        "start_seconds": round(started, 1),
        "first_seconds": round(first, 2),
    }


def main():
    import torch

    one = os.environ.get("KILN_SERVE_VLLM_MODEL")
    if one:
        serve_vllm_one(one, bool(os.environ.get("KILN_SERVE_MOE")))
        return
    engine = os.environ.get("KILN_COMPONENT", "")
    serve = {"sglang": serve_sglang, "vllm": serve_vllm}.get(engine)
    if serve is None:
        sys.exit(f"KILN_COMPONENT is {engine!r}: this proof serves sglang or vllm")
    assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
    with tempfile.TemporaryDirectory(prefix="kiln-serve-") as root:
        name, runs = serve(root)
    doc = {"engine": name, "gpu": torch.cuda.get_device_name(), "runs": runs}
    print("kiln-serve: " + json.dumps(doc), flush=True)


if __name__ == "__main__":
    main()
