#!/usr/bin/env bash
# Makes the bundle bench/h200/run.sh installs on the H200, on a connected machine: a Python 3.12
# venv with torch 2.11.0 from PyPI (what the H200's /opt/torch/.venv holds; it is recorded in the
# lock as `installed`, so the bundle leaves it out), kiln installs flashinfer[cutedsl] for 9.0 and
# 12.0 with CUDA 13.0.88 from NVIDIA's PyPI wheels (the H200's nvcc), locks it and bundles it in
# parts of at most 56 MiB (the device tool carries 64 MiB per call, the checkout included).
#
# usage: bench/h200/make-bundle.sh WORKDIR   (needs python3.12 and network; ~10 minutes)
set -euo pipefail
W=$(realpath "${1:?usage: $0 WORKDIR}")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
K=${KILN:-$REPO/target/release/kiln}
PY312=${PY312:-python3.12}
mkdir -p "$W"
cd "$W"
[ -x venv/bin/python ] || "$PY312" -m venv venv
venv/bin/python -m pip install -q torch==2.11.0
if [ ! -x cuda/nvidia/cu13/bin/nvcc ]; then
  venv/bin/python -m pip install -q --target cuda nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96 \
    nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
fi
export CUDA_HOME=$W/cuda/nvidia/cu13
k() { "$K" --python venv/bin/python --cache-dir "$W/cache" "$@"; }
k install 'flashinfer[cutedsl]' --arch 9.0,12.0
k doctor 'flashinfer[cutedsl]' --arch 9.0,12.0
k lock 'flashinfer[cutedsl]' -o kiln.lock
k bundle --lock kiln.lock -o "$W/parts/flashinfer.tar" --split 56MiB
cp "$K" "$W/kiln"
ls -la "$W/parts"
