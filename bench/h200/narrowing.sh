#!/usr/bin/env bash
# flash-attn's arch narrowing: one kernel unit from kiln's 12.0 build (its build.ninja), compiled
# for 120 alone (what kiln sets: FLASH_ATTN_CUDA_ARCHS=120) and for flash-attn's default list
# 80;90;100;120 (setup.py:69-70, gencodes :179-191), side by side.
# usage: narrowing.sh BUILD.NINJA UNIT
K=${KILN:-/tmp/fa/kiln}
PY=${PY:-/opt/torch/.venv/bin/python3}
"$PY" "$(dirname "$0")/narrowing.py" "$K" --ninja "$1" "$2" \
  "sm120=arch=compute_120,code=sm_120" \
  "default=arch=compute_80,code=sm_80;arch=compute_90,code=sm_90;arch=compute_100,code=sm_100;arch=compute_120,code=sm_120"
