"""kiln's JIT proof for flashinfer: compile real kernels through flashinfer's own JIT path for
the target archs, with no GPU, and name the binaries it wrote (kiln reads them back).

kiln runs this as `python -I -B flashinfer-jit.py` with, from the recipe's [verify.jit] env:
FLASHINFER_CUDA_ARCH_LIST (space-separated, e.g. "12.0f"; read at import,
flashinfer/compilation_context.py:114-125 in 0.7.4), CUDA_HOME (flashinfer/jit/cpp_ext.py:47-64),
MAX_JOBS (ninja -j, cpp_ext.py:404-408), FLASHINFER_NVCC_THREADS (cpp_ext.py:94-112), and
KILN_JIT_DIR, a fresh directory this script must write into. KILN_JIT_KERNELS (optional) picks
kernels: silu (default; the quickest), norm, decode, and cutlass_fused_moe — the CUTLASS fused MoE
behind SGLang's and vLLM's `flashinfer_cutlass` MoE backend, built for the target archs' family
(gen_cutlass_fused_moe_sm120_module / _sm100_ / _sm90_, flashinfer/jit/fused_moe.py:108-163 in
0.7.2; use_fast_build, the smaller kernel set; many minutes and GiBs per job).

The kernels are those flashinfer builds at first use: gen_act_and_mul_module("silu")
(flashinfer/activation.py:48), gen_norm_module() (flashinfer/norm/__init__.py:277) and
gen_single_decode_module(...) (flashinfer/decode.py:404); `.build()` writes build.ninja and runs
ninja (flashinfer/jit/core.py:618-640), as `build_and_load()` does (core.py:372) minus the load,
which needs a GPU.

Prints one JSON line per kernel: {"kernel": ..., "files": [...], "seconds": ...}.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

work = Path(os.environ["KILN_JIT_DIR"]).resolve()
cuda_home = Path(os.environ.get("CUDA_HOME", "")).resolve()
# The cache directory is fixed when flashinfer is imported (flashinfer/jit/env.py:66-70, :382-397).
os.environ["FLASHINFER_WORKSPACE_BASE"] = str(work)
# flashinfer runs a bare `ninja` (cpp_ext.py run_ninja); the environment's bin holds it.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(cuda_home / "bin"), os.environ.get("PATH", "")])


def link_dir() -> Path:
    """The link line asks for -lcudart -lcuda (flashinfer/jit/cpp_ext.py:273-279). With no driver
    there is no libcuda.so, and NVIDIA's PyPI toolkit has no lib64/ or unversioned libcudart.so:
    give the linker an empty libcuda.so stub (as the toolkit's lib64/stubs does) and a libcudart.so
    link. gcc links with --as-needed, so neither is recorded in the module."""
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
from flashinfer.jit.activation import gen_act_and_mul_module  # noqa: E402

kernels = {
    "silu": lambda: gen_act_and_mul_module("silu"),
}
try:
    from flashinfer.jit.norm import gen_norm_module
    from flashinfer.jit.attention.modules import gen_single_decode_module

    kernels["norm"] = gen_norm_module
    # fp16 q/kv/o, head_dim 64, no RoPE, no sliding window, no soft-cap: the smallest decode.
    kernels["decode"] = lambda: gen_single_decode_module(torch.float16, torch.float16, torch.float16, 64, 64, 0, False, False)
except ImportError:
    pass


def cutlass_fused_moe():
    """The fused MoE module for the family of the first target arch (KILN_TARGET_ARCHS)."""
    from flashinfer.jit import fused_moe

    major = int(os.environ.get("KILN_TARGET_ARCHS", "12.0").split()[0].split(".")[0])
    gen = {12: "gen_cutlass_fused_moe_sm120_module", 10: "gen_cutlass_fused_moe_sm100_module", 9: "gen_cutlass_fused_moe_sm90_module"}
    make = getattr(fused_moe, gen[major])
    try:
        return make(use_fast_build=True)
    except TypeError:  # a release whose generator has no fast-build switch
        return make()


kernels["cutlass_fused_moe"] = cutlass_fused_moe

for name in os.environ.get("KILN_JIT_KERNELS", "silu").split(","):
    start = time.perf_counter()
    spec = kernels[name.strip()]()
    spec.build(verbose=True)
    print(json.dumps({"kernel": spec.name, "asked": name.strip(), "files": [str(spec.get_library_path())], "seconds": round(time.perf_counter() - start, 2)}), flush=True)
