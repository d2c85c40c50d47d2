"""flashinfer on a real GPU, installed by kiln: the kernels flashinfer JIT-compiles at first use
(SiLU-and-mul, RMSNorm, decode attention), compiled through flashinfer's own JIT for this GPU,
run, and compared with a torch reference; and a CuTe DSL kernel compiled and run. Part of the
proof recorded in docs/gpu-proof.md (bench/h200/run.sh runs it).

Usage: python flashinfer_gpu.py OUT.json

The JIT compiles for the archs in FLASHINFER_CUDA_ARCH_LIST (flashinfer/compilation_context.py:
114-125 in 0.7.4), which kiln's install sets as a default for the environment; unset, flashinfer
takes the GPU's own. Every module's .so is listed so that `kiln arch` and `cuobjdump` can read
which SASS it holds. The first call of each kernel includes its JIT compile (cold workspace:
FLASHINFER_WORKSPACE_BASE is a fresh directory unless the caller sets one).
"""

import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

out_path = Path(sys.argv[1])
results = {
    "device": torch.cuda.get_device_name(0),
    "capability": "%d.%d" % torch.cuda.get_device_capability(0),
    "torch": torch.__version__,
    "FLASHINFER_CUDA_ARCH_LIST": os.environ.get("FLASHINFER_CUDA_ARCH_LIST"),
    "FLASHINFER_WORKSPACE_BASE": os.environ.get("FLASHINFER_WORKSPACE_BASE"),
    "kernels": [],
}

t0 = time.perf_counter()
import flashinfer  # noqa: E402

results["flashinfer"] = flashinfer.__version__
results["import_seconds"] = round(time.perf_counter() - t0, 2)


def timed(fn, reps=20):
    """(seconds of the first call, median ms of the next `reps`) with CUDA events."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return out, first, times[len(times) // 2]


def check(name, out, ref, atol, rtol):
    err = (out.float() - ref.float()).abs()
    ok = bool(torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol))
    return {"kernel": name, "max_abs_err": float(err.max()), "atol": atol, "rtol": rtol, "match": ok}


torch.manual_seed(0)
dev = "cuda"

# SiLU-and-mul: silu(x[..., :d]) * x[..., d:] (flashinfer/activation.py silu_and_mul).
x = torch.randn(1024, 2 * 4096, dtype=torch.bfloat16, device=dev)
out, first, ms = timed(lambda: flashinfer.activation.silu_and_mul(x))
ref = F.silu(x[..., :4096].float()) * x[..., 4096:].float()
r = check("silu_and_mul bf16 [1024, 2x4096]", out, ref, 2e-2, 2e-2)
r.update(first_call_s=round(first, 3), median_ms=round(ms, 4))
results["kernels"].append(r)

# RMSNorm. flashinfer.norm.rmsnorm runs a CuTe DSL kernel by default in 0.7.4
# (flashinfer/norm/__init__.py:69, :1284-1296); the CUDA JIT `norm` module is what it runs with
# FLASHINFER_USE_CUDA_NORM=1, called here directly (get_norm_module().rmsnorm, :1285).
h = torch.randn(1024, 4096, dtype=torch.bfloat16, device=dev)
w = torch.randn(4096, dtype=torch.bfloat16, device=dev)
hf = h.float()
ref = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
out, first, ms = timed(lambda: flashinfer.norm.rmsnorm(h, w, eps=1e-6))
r = check("rmsnorm bf16 [1024, 4096] (default: CuTe DSL kernel)", out, ref, 5e-2, 2e-2)
r.update(first_call_s=round(first, 3), median_ms=round(ms, 4))
results["kernels"].append(r)
cuda_out = torch.empty_like(h)
out, first, ms = timed(lambda: (flashinfer.norm.get_norm_module().rmsnorm(cuda_out, h, w, 1e-6, False), cuda_out)[1])
r = check("rmsnorm bf16 [1024, 4096] (CUDA JIT norm module)", out, ref, 5e-2, 2e-2)
r.update(first_call_s=round(first, 3), median_ms=round(ms, 4))
results["kernels"].append(r)

# Decode attention, one request, GQA 32 query heads over 8 KV heads, head dim 128, 4096 keys
# (flashinfer/decode.py single_decode_with_kv_cache, NHD layout).
qo, kvh, d, n = 32, 8, 128, 4096
q = torch.randn(qo, d, dtype=torch.bfloat16, device=dev)
k = torch.randn(n, kvh, d, dtype=torch.bfloat16, device=dev)
v = torch.randn(n, kvh, d, dtype=torch.bfloat16, device=dev)
out, first, ms = timed(lambda: flashinfer.decode.single_decode_with_kv_cache(q, k, v))
kk = k.float().repeat_interleave(qo // kvh, dim=1)  # [n, qo, d]
vv = v.float().repeat_interleave(qo // kvh, dim=1)
scores = torch.einsum("hd,nhd->hn", q.float(), kk) / math.sqrt(d)
ref = torch.einsum("hn,nhd->hd", scores.softmax(-1), vv)
r = check("single_decode bf16 GQA 32/8 d128 kv4096", out, ref, 2e-2, 2e-2)
r.update(first_call_s=round(first, 3), median_ms=round(ms, 4))
results["kernels"].append(r)

# A CuTe DSL kernel compiled for this GPU (the DSL detects it) and run.
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass.cute.runtime import from_dlpack  # noqa: E402

threads, N = 256, 1 << 20


@cute.kernel
def add_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * threads + tidx
    c[i] = a[i] + b[i]


@cute.jit
def add(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    add_kernel(a, b, c).launch(grid=(N // threads, 1, 1), block=(threads, 1, 1))


a, b = torch.randn(N, device=dev), torch.randn(N, device=dev)
c = torch.empty_like(a)
ta, tb, tc = (from_dlpack(t) for t in (a, b, c))
start = time.perf_counter()
compiled = cute.compile(add, ta, tb, tc)
compile_s = time.perf_counter() - start
compiled(ta, tb, tc)
torch.cuda.synchronize()
r = check("CuTe DSL elementwise add fp32 [1M]", c, a + b, 0.0, 0.0)
r.update(compile_s=round(compile_s, 3), arch=os.environ.get("CUTE_DSL_ARCH", "detected"))
results["kernels"].append(r)

# The modules the JIT wrote, for kiln arch / cuobjdump.
base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE", Path.home()))
results["modules"] = sorted(str(p) for p in base.rglob("cached_ops/**/*.so"))
results["all_match"] = all(k["match"] for k in results["kernels"])
out_path.write_text(json.dumps(results, indent=1))
print(json.dumps(results, indent=1))
sys.exit(0 if results["all_match"] else 1)
