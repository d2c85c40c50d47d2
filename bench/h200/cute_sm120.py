"""Ahead-of-time compile of flashinfer 0.7.4's b12x dense block-scaled GEMM for sm_120a, with no
SM120 GPU (no GPU at all, or another one such as an H200/sm_90, which is ignored), keeping the cubin.

Kernel: ``DenseGemmKernel`` (exported as ``Sm120B12xBlockScaledDenseGemmKernel``),
flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120_b12x.py:215 (class), :3119 (alias), the
SM120/SM121 warp-level block-scaled MMA kernel (OMMA.SF m16n8k64 for FP4) that
``mm_fp4(..., backend="b12x")`` and ``mm_mxfp8(..., backend="b12x")`` run. Paths below are
relative to the venv's site-packages; line numbers are flashinfer 0.7.4 as installed there.

NVFP4 (default; ``mm_fp4`` with its defaults out_dtype=bf16, use_nvfp4=True, enable_pdl=True,
gemm_base.py:10096-10118, runner made at :10311-10313):
  * gemm_base.py:8613-8651 ``_b12x_gemm_fp4_requirement``: SM 12.0/12.1 only, 128x4 SF layout,
    K % 32 == 0.
  * gemm_base.py:9654 ``_b12x_gemm_fp4_runner`` -> ``B12xFp4GemmRunner.forward`` (:9746-9848):
    default tactic (tactic -1, :9763-9773) from ``_select_default_dense_gemm_plan(m, n, real_k,
    sm_count, expected_m=m)`` (:9681-9684; kernel file :3016-3115); sf_vec_size 16 and
    Float8E4M3FN scales (:9759-9760); sf_m/sf_n/sf_k (:9788-9790); kernel ctor (:9806-9813)
    ``DenseGemmKernel(16, tile, (1, 1), use_prefetch=False, enable_pdl=True, swap_ab=plan.swap_ab)``;
    ``_compile_block_scaled_gemm(..., ab_cutlass_dtype=Uint8, c=BFloat16, ab_assumed_align=32,
    cluster_shape_mn=(1, 1), swap_ab=False, batch_size=1)`` (:9818-9832).
MXFP8 (``--format mxfp8``; ``mm_mxfp8`` -> gemm_base.py:8033 ``_b12x_gemm_mxfp8_runner(major,
minor, True, out_dtype)``):
  * gemm/gemm_mm_mxfp8_cute_dsl.py:50 requirement (CUDA 13, K % 128 == 0 at :75), :96 runner,
    forward :193-290: plan with is_mxfp8=True (:123-131), sf_vec_size 32 + Float8E8M0FNU
    (:205-206), ctor with mma_k=32, tile_k=128 (:248-257), A/B as Float8E4M3FN (:261-275).

Both runners compile through gemm/gemm_mm_fp4_cute_dsl.py:44 ``_compile_block_scaled_gemm``, which
adds only two *local-GPU* queries -- ``torch.cuda.current_device()`` (:80, for its cache key) and
``get_max_active_clusters`` (:90, cutlass.utils.HardwareInfo's occupancy probe on the local
device) -- and an in-memory cache around :169 ``_make_blockscaled_gemm_compile_fn``, which builds
the fake arguments (``make_fake_compact_tensor`` with symbolic M/N/K, ``make_ptr`` for the SFs,
``make_fake_stream(use_tvm_ffi_env_stream=True)``) and runs ``cute.compile(gemm.wrapper, ...,
options="--opt-level 2 --enable-tvm-ffi")`` (:232-248). This script calls that function itself,
unchanged, and supplies the two GPU-derived numbers for the *target* part instead of asking the
local GPU: ``max_active_clusters`` = SM count (cluster 1x1; HardwareInfo's probe,
nvidia_cutlass_dsl/dsl_packages/cutlass/utils/hardware_info.py:45-130, sizes a dummy kernel to all
the shared memory an SM offers, so it yields one cluster per SM) -- it is a ``cutlass.Constexpr``
baked into the kernel -- and the same SM count for the tile heuristic (``get_device_sm_count``). Default 170
(RTX 5090); RTX PRO 6000 Blackwell = 188, DGX Spark (sm_121a) = 48.

No GPU is touched: importing the kernel module (and with it the ``flashinfer`` package) makes no
device query that fails without a GPU, and nothing here launches or loads the kernel (the DSL
loads the cubin lazily, on the first call). The DSL reads ``CUTE_DSL_ARCH`` when ``cutlass`` is
first imported (nvidia_cutlass_dsl/dsl_packages/cutlass/base_dsl/env_manager.py: the ``arch``
property :991-1000 only falls back to ``detect_gpu_arch`` :412-436 when the variable is unset), so
the environment is set below before any import of cutlass or flashinfer; on an H200 its sm_90 is
therefore never used.

Usage: python cute_sm120.py OUT_DIR [--format nvfp4|mxfp8] [--m 128 --n 4096 --k 4096]
                                    [--sm-count 170] [--arch sm_120a|sm_121a]
Prints one JSON line: {"kernel", "arch", "files", "seconds", ...}.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("out_dir")
ap.add_argument("--format", default="nvfp4", choices=["nvfp4", "mxfp8"])
ap.add_argument("--m", type=int, default=128)
ap.add_argument("--n", type=int, default=4096)
ap.add_argument("--k", type=int, default=4096)
ap.add_argument("--sm-count", type=int, default=170, help="SMs of the target SM12x part")
ap.add_argument("--arch", default="sm_120a", choices=["sm_120a", "sm_121a"])
args = ap.parse_args()

out = Path(args.out_dir).resolve()
out.mkdir(parents=True, exist_ok=True)

# Must be set before cutlass (or flashinfer, which imports it) is imported.
os.environ["CUTE_DSL_ARCH"] = args.arch
os.environ["CUTE_DSL_KEEP"] = "cubin"
os.environ["CUTE_DSL_DUMP_DIR"] = str(out)
# A warm on-disk JIT cache must not skip the compile (and with it the dump).
os.environ["CUTE_DSL_CACHE_DIR"] = str(out / ".cute_cache")
os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"

start = time.perf_counter()

import cutlass  # noqa: E402

from flashinfer.gemm.kernels.dense_blockscaled_gemm_sm120_b12x import (  # noqa: E402
    Sm120B12xBlockScaledDenseGemmKernel,
    _select_default_dense_gemm_plan,
)
from flashinfer.gemm.gemm_mm_fp4_cute_dsl import _make_blockscaled_gemm_compile_fn  # noqa: E402
from cutlass.cutlass_dsl import CuTeDSL  # noqa: E402

# The target the DSL will compile for; with a GPU present (e.g. an H200) this must still be ours.
dsl_arch = CuTeDSL._get_dsl().envar.arch
if dsl_arch != args.arch:
    sys.exit(f"CuTe DSL target is {dsl_arch}, not {args.arch}: cutlass was imported before the env was set?")

m, n, real_k = args.m, args.n, args.k
mxfp8 = args.format == "mxfp8"
enable_pdl = True  # mm_fp4 default; mm_mxfp8 passes True
c_cutlass_dtype = cutlass.BFloat16  # out_dtype=torch.bfloat16 default
batch_size = 1
if mxfp8:
    if real_k % 128:
        sys.exit(f"b12x mm_mxfp8 needs K % 128 == 0 (gemm_mm_mxfp8_cute_dsl.py:75), got {real_k}")
    sf_vec_size, sf_dtype = 32, cutlass.Float8E8M0FNU
    ab_mma_dtype = ab_host_dtype = cutlass.Float8E4M3FN
    ctor_extra = dict(mma_k=32, tile_k=128)
else:
    if real_k % 32:
        sys.exit(f"b12x mm_fp4 needs K % 32 == 0 (gemm_base.py:8644), got K={real_k}")
    sf_vec_size, sf_dtype = 16, cutlass.Float8E4M3FN
    ab_mma_dtype, ab_host_dtype = cutlass.Float4E2M1FN, cutlass.Uint8  # 2 x FP4 per byte
    ctor_extra = {}

# Default (tactic -1) plan, as in forward().
plan = _select_default_dense_gemm_plan(m, n, real_k, args.sm_count, is_mxfp8=mxfp8, expected_m=m)
mma_tiler_mn, cluster_shape_mn, swap_ab, use_prefetch = plan.mma_tiler_mn, (1, 1), plan.swap_ab, False
sf_m = (m + 127) // 128
sf_n = (n + 127) // 128
sf_k = (real_k // sf_vec_size + 3) // 4

if not Sm120B12xBlockScaledDenseGemmKernel.can_implement(
    ab_mma_dtype, sf_dtype, sf_vec_size, c_cutlass_dtype, mma_tiler_mn, (1, 1),
    n, real_k, batch_size, "k", "k", "n", swap_ab=swap_ab,
):
    sys.exit(f"can_implement rejected tile {mma_tiler_mn} swap_ab={swap_ab} for N={n} K={real_k}")

gemm = Sm120B12xBlockScaledDenseGemmKernel(
    sf_vec_size,
    mma_tiler_mn,
    cluster_shape_mn,
    **ctor_extra,
    use_prefetch=use_prefetch,
    enable_pdl=enable_pdl,
    swap_ab=swap_ab,
)

# _compile_block_scaled_gemm without its two local-GPU queries.
max_active_clusters = args.sm_count  # launch cluster size 1
compile_kernel = _make_blockscaled_gemm_compile_fn(
    gemm,
    ab_cutlass_dtype=ab_host_dtype,
    sf_dtype=sf_dtype,
    c_cutlass_dtype=c_cutlass_dtype,
    ab_assumed_align=32,
    swap_ab=False,
    sf_m=sf_m,
    sf_n=sf_n,
    sf_k=sf_k,
    batch_size=batch_size,
    max_active_clusters=max_active_clusters,
)
compile_start = time.perf_counter()
compile_kernel()  # returns the (lazily loaded) compiled function; never called here
compile_seconds = time.perf_counter() - compile_start

files = sorted(str(p) for p in out.glob("*.cubin"))
if not files:
    sys.exit(f"cute.compile succeeded but left no cubin in {out}")
fmt = "MXFP8 (E4M3, UE8M0 SF/32)" if mxfp8 else "NVFP4 (E2M1, E4M3 SF/16)"
print(
    json.dumps(
        {
            "kernel": (
                f"flashinfer b12x DenseGemmKernel {fmt} -> bf16, M={m} N={n} K={real_k}, "
                f"tile={list(mma_tiler_mn)} swap_ab={swap_ab} pdl={enable_pdl} "
                f"max_active_clusters={max_active_clusters}"
            ),
            "arch": args.arch,
            "files": files,
            "seconds": round(time.perf_counter() - start, 2),
            "compile_seconds": round(compile_seconds, 2),
        }
    ),
    flush=True,
)
