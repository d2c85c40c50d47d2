"""kiln's ahead-of-time compile for flashinfer (`kiln install flashinfer --aot`): build the JIT
modules a serving process builds at its first request, for the target archs, and say where
flashinfer looks for a precompiled copy, so kiln can install it there.

Where a precompiled module is found (flashinfer 0.7.4): `JitSpec.build_and_load()`
(flashinfer/jit/core.py:372-393) first calls `try_load()` (core.py:576-610), which loads an AOT
artifact as it is, without ninja or nvcc; `get_aot_artifacts()` (flashinfer/jit/env.py:296-300)
returns `FLASHINFER_AOT_DIR/<name>/<name>.so` whenever that file exists, and
`FLASHINFER_AOT_DIR` is `<package>/data/aot` (env.py:238). A module in the JIT workspace instead
(`~/.cache/flashinfer/<version>/<archs>/cached_ops`, env.py:382-397) always goes through
`build()` (core.py:618-640), which rewrites build.ninja with absolute paths and runs ninja: it
needs ninja and nvcc at run time and rebuilds when the cache was moved or CUDA_HOME differs.

kiln runs this as `python -I -B flashinfer-aot.py` with KILN_AOT_DIR (a fresh directory to
write into), KILN_AOT_MODULES (comma-separated names below), the recipe's [aot] env
(FLASHINFER_CUDA_ARCH_LIST, MAX_JOBS), CUDA_HOME and PATH. It prints one JSON line per module:
{"module": NAME, "name": FLASHINFER_MODULE, "file": ABS_PATH, "install": PATH_IN_SITE_PACKAGES}.

With KILN_AOT_CHECK=1 it compiles nothing: with FLASHINFER_DISABLE_JIT=1 (core.py:383-390
raises instead of compiling) it asks flashinfer for each module and loads what flashinfer finds,
printing {"module": NAME, "name": ..., "aot": true, "path": ..., "loaded": true} or an "error".
"""

import json
import os
import subprocess
import sys
from pathlib import Path

work = Path(os.environ["KILN_AOT_DIR"]).resolve()
check = os.environ.get("KILN_AOT_CHECK") == "1"
names = [m.strip() for m in os.environ.get("KILN_AOT_MODULES", "silu_and_mul").split(",") if m.strip()]

# The workspace (generated sources, objects) is fixed at import (flashinfer/jit/env.py:66-70).
os.environ["FLASHINFER_WORKSPACE_BASE"] = str(work / "workspace")
if check:
    os.environ["FLASHINFER_DISABLE_JIT"] = "1"
else:
    cuda_home = Path(os.environ.get("CUDA_HOME", "")).resolve()
    # flashinfer runs a bare `ninja` (flashinfer/jit/cpp_ext.py:418); the environment's bin has it.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(cuda_home / "bin"), os.environ.get("PATH", "")])

    def link_dir() -> Path:
        """-lcudart -lcuda on the link line (cpp_ext.py:273-279): with no driver, an empty
        libcuda.so stub, and a libcudart.so link for NVIDIA's PyPI toolkit (no lib64/)."""
        d = work / "link"
        d.mkdir(parents=True, exist_ok=True)
        stub = d / "libcuda.so"
        if not stub.exists():
            subprocess.run([os.environ.get("CC", "cc"), "-shared", "-o", str(stub), "-Wl,-soname,libcuda.so.1", "-x", "c", "/dev/null"], check=True)
        cudart = d / "libcudart.so"
        if not cudart.exists():
            for lib in ("lib64", "lib"):
                found = sorted((cuda_home / lib).glob("libcudart.so*"))
                if found:
                    cudart.symlink_to(found[0])
                    break
        return d

    os.environ["FLASHINFER_EXTRA_LDFLAGS"] = (os.environ.get("FLASHINFER_EXTRA_LDFLAGS", "") + f" -L{link_dir()}").strip()

import torch  # noqa: E402
from flashinfer.jit import env as jit_env  # noqa: E402
from flashinfer.jit.activation import gen_act_and_mul_module  # noqa: E402
from flashinfer.jit.attention.modules import gen_batch_decode_module  # noqa: E402
from flashinfer.jit.core import build_jit_specs  # noqa: E402
from flashinfer.jit.norm import gen_norm_module  # noqa: E402

aot_dir = Path(jit_env.FLASHINFER_AOT_DIR)
site = Path(jit_env._package_root).parent
if not check:
    # Compile every module even where a copy is installed already (build_jit_specs skips a
    # module whose AOT file exists, core.py:879); env.py:17-19 says to override jit_env this way.
    jit_env.FLASHINFER_AOT_DIR = work / "no-aot"


def decode(dtype):
    # BatchDecodeWithPagedKVCacheWrapper.plan without tensor cores: q/kv/o dtype, int32 indptr,
    # head_dim 128 for q·k and v, no RoPE in the kernel, no sliding window, no soft-cap
    # (flashinfer/decode.py:2883-2893).
    return lambda: gen_batch_decode_module(dtype, dtype, dtype, torch.int32, 128, 128, 0, False, False)


def prefill_fa2(dtype):
    # BatchDecodeWithPagedKVCacheWrapper.plan with tensor cores (vLLM's default) builds the fa2
    # batch-prefill module (flashinfer/decode.py:2837-2850 -> prefill.py:586-588).
    try:
        from flashinfer.jit.attention.modules import _gen_batch_prefill_primary_module
    except ImportError:  # before 0.7: gen_batch_prefill_module (jit/attention/modules.py:956 in 0.6.8.post1)
        from flashinfer.jit.attention.modules import gen_batch_prefill_module

        return lambda: gen_batch_prefill_module("fa2", dtype, dtype, dtype, torch.int32, 128, 128, 0, False, False, False)
    return lambda: _gen_batch_prefill_primary_module("fa2", dtype, dtype, dtype, torch.int32, 128, 128, 0, False, False, False, False)


# silu_and_mul: flashinfer/activation.py:47-48; rmsnorm and fused_add_rmsnorm share the `norm`
# module (flashinfer/norm/__init__.py:271-277, used where the CuTe DSL path is off, :1284).
modules = {
    "silu_and_mul": lambda: gen_act_and_mul_module("silu"),
    "norm": gen_norm_module,
    "batch_decode_bf16_hd128": decode(torch.bfloat16),
    "batch_decode_f16_hd128": decode(torch.float16),
    "batch_prefill_fa2_bf16_hd128": prefill_fa2(torch.bfloat16),
}


def cutlass_fused_moe():
    """The CUTLASS fused MoE module for each arch family in the target list, as flashinfer builds
    it at the first MoE forward: `get_cutlass_fused_moe_module(backend)` (flashinfer/fused_moe/
    core.py:205-215 in 0.6.8.post1) with `use_fast_build=False`, the default its callers keep
    (vLLM 0.20.0's FlashInfer CUTLASS MoE backend, flashinfer_cutlass_moe.py:369 ->
    flashinfer.fused_moe.cutlass_fused_moe). One family per module name (fused_moe_90,
    fused_moe_100, fused_moe_103, fused_moe_120), so several targets give several modules."""
    from flashinfer.jit import fused_moe

    gen = {
        "12": "gen_cutlass_fused_moe_sm120_module",
        "10.3": "gen_cutlass_fused_moe_sm103_module",
        "10": "gen_cutlass_fused_moe_sm100_module",
        "9": "gen_cutlass_fused_moe_sm90_module",
    }
    picked = []
    for arch in os.environ.get("KILN_TARGET_ARCHS", "").split():
        major, _, minor = arch.partition(".")
        name = gen.get(f"{major}.{minor.rstrip('af')}") or gen.get(major)
        if name is None:
            sys.exit(f"cutlass_fused_moe: flashinfer has no CUTLASS fused MoE module for {arch} (flashinfer/fused_moe/core.py:205-215)")
        if name not in picked:
            picked.append(name)
    return [getattr(fused_moe, n)(use_fast_build=False) for n in picked]


# Many minutes and GiBs per job: compiled only when asked (`[aot] on_request`).
modules["cutlass_fused_moe"] = cutlass_fused_moe

unknown = [n for n in names if n not in modules]
if unknown:
    sys.exit(f"unknown module(s) {unknown}; this script knows {sorted(modules)}")
# A name may stand for several specs (one per arch family): (name, spec) pairs, in order.
specs = [(n, spec) for n in names for spec in (lambda made: made if isinstance(made, list) else [made])(modules[n]())]

if check:
    for n, spec in specs:
        line = {"module": n, "name": spec.name, "aot": bool(spec.is_aot), "path": str(spec.get_library_path())}
        try:
            spec.build_and_load()
            line["loaded"] = True
        except Exception as e:  # noqa: BLE001
            line["loaded"] = False
            line["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
        print(json.dumps(line), flush=True)
    sys.exit(0)

# One ninja run for all modules, `-j MAX_JOBS` (core.py:867-905 and cpp_ext.py:404-428).
build_jit_specs([spec for _, spec in specs], verbose=True, skip_prebuilt=False)
for n, spec in specs:
    install = (aot_dir / spec.name / f"{spec.name}.so").relative_to(site)
    print(json.dumps({"module": n, "name": spec.name, "file": str(spec.jit_library_path), "install": str(install)}), flush=True)
