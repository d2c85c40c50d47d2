"""Bench only (bench/h200/unit-memory.sh): a few of flash-attn 2.8.3.post2's kernel units built as
one torch CUDA extension, the way flash-attn's own setup.py builds them, so that kiln's memory
gate can be measured on real units without a 73-unit build.

Reads, from the environment (kiln's bench recipe sets them):
  FA_SRC     an extracted flash-attn 2.8.3.post2 sdist (its csrc/ is compiled in place)
  FA_UNITS   file names under csrc/flash_attn/src, blank-separated
  FA_ARCHS   the arch list as flash-attn's FLASH_ATTN_CUDA_ARCHS spells it ("90", "80;90;100;120")
  NVCC_THREADS
The nvcc flags are flash-attn's (2.8.3.post2 setup.py:199-212 and :306, `--threads`
NVCC_THREADS), its include dirs (:308-312), one `-gencode arch=compute_X,code=sm_X` per arch
(:179-191). The units need no flash_api.cpp: a small module of its own makes the extension importable.
"""

import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

src = os.environ["FA_SRC"]
units = os.environ["FA_UNITS"].split()
archs = [a for a in os.environ["FA_ARCHS"].split(";") if a]
gencode = []
for a in archs:
    gencode += ["-gencode", "arch=compute_%s,code=sm_%s" % (a, a)]
nvcc = [
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
] + gencode + ["--threads", os.environ.get("NVCC_THREADS") or "4"]
kernels = os.path.join(src, "csrc", "flash_attn", "src")
setup(
    name="fa-units",
    version="0.1.0",
    packages=["fa_units"],
    ext_modules=[
        CUDAExtension(
            "fa_units._C",
            ["csrc/module.cpp"] + [os.path.join(kernels, u) for u in units],
            extra_compile_args={"cxx": ["-O3", "-std=c++17"], "nvcc": nvcc},
            include_dirs=[
                os.path.join(src, "csrc", "flash_attn"),
                kernels,
                os.path.join(src, "csrc", "cutlass", "include"),
            ],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
