#!/usr/bin/env bash
# The flashinfer proof on an H200 (sm_90, CUDA 13.0, torch 2.11.0 in /opt/torch/.venv, no
# network); its output is recorded in docs/gpu-proof.md.
#
# The stack arrives as a kiln bundle made on a connected machine (bench/h200/make-bundle.sh),
# split into parts under .dev/parts, with kiln itself as .dev/kiln. Three steps, each inside a
# 10-minute call:
#   bench/h200/run.sh install   kiln install --bundle into the machine's torch environment, and
#                               kiln doctor for 9.0
#   bench/h200/run.sh gpu       flashinfer's JIT kernels and a CuTe DSL kernel compiled for the
#                               GPU, run, and compared with torch references, in a cold JIT
#                               workspace and then again in a second process (warm); kiln arch
#                               and cuobjdump on the modules
#   bench/h200/run.sh cross     the same JIT modules and CuTe DSL kernels compiled for 12.0 (no
#                               SM120 GPU here), read back by kiln and by cuobjdump; doctor
#                               --arch 12.0
#   bench/h200/run.sh aot       kiln install flashinfer --aot (offline), then the first-call
#                               latency of silu, rmsnorm and decode: cold JIT, kiln's warm
#                               cache, and a JIT-workspace hit, each in a fresh process
set -uo pipefail
K=${KILN:-$PWD/.dev/kiln}
PARTS=${PARTS:-.dev/parts}
PY=${PY:-/opt/torch/.venv/bin/python3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CACHE=${KILN_CACHE:-/tmp/kiln-cache}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
export PYTHONUNBUFFERED=1
k() { "$K" --python "$PY" --cache-dir "$CACHE" --no-progress "$@"; }
step() { printf '\n== %s\n' "$*"; }
verdicts() { # doctor --json FILE: one line per component
  "$PY" - "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d.get("components", []):
    print(f"  {c['name']:12} {c['status']:10} {c.get('evidence', '')[:300]}")
for j in d.get("jit", []) or []:
    print("  jit:", json.dumps(j)[:400])
PYEOF
}
timed() { # runs "$@" and prints its wall time
  local s rc ms
  s=$(date +%s%N)
  "$@"
  rc=$?
  ms=$((($(date +%s%N) - s) / 1000000))
  printf '   (%d.%03d s, exit %d)\n' $((ms / 1000)) $((ms % 1000)) "$rc" >&2
  return "$rc"
}

case "${1:-}" in
install)
  step "machine"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nvcc --version | tail -1
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  "$PY" -m pip list 2>/dev/null | grep -i -E '^(flashinfer|nvidia-cutlass|apache-tvm)' || echo "  flashinfer, cutlass-dsl, tvm-ffi: not installed"
  ls -la "$PARTS"
  step "kiln install --bundle (this machine reaches no network)"
  first=$(ls "$PARTS"/flashinfer.tar.*-of-* | sort -V | head -1)
  timed k install --bundle "$first" 2>&1 | tee "$OUT/install.log"
  "$PY" -m pip list 2>/dev/null | grep -i -E '^(flashinfer|nvidia-cutlass|apache-tvm|cuda-tile|nvidia-cudnn-frontend)'
  step "kiln doctor --arch 9.0"
  timed k doctor 'flashinfer[cutedsl]' --arch 9.0 --json > "$OUT/doctor-9.0.json"
  verdicts "$OUT/doctor-9.0.json"
  ;;
gpu)
  step "flashinfer JIT kernels and a CuTe DSL kernel on the GPU, cold JIT workspace"
  rm -rf /tmp/fi-ws
  FLASHINFER_WORKSPACE_BASE=/tmp/fi-ws timed "$PY" bench/h200/flashinfer_gpu.py "$OUT/gpu-cold.json" 2>&1 | tail -60
  step "the same in a new process, the workspace now warm"
  FLASHINFER_WORKSPACE_BASE=/tmp/fi-ws timed "$PY" bench/h200/flashinfer_gpu.py "$OUT/gpu-warm.json" 2>&1 | grep -E 'first_call_s|"kernel"|match|import_seconds'
  step "kiln arch and cuobjdump on the modules the JIT wrote"
  mapfile -t mods < <(find /tmp/fi-ws -name '*.so' | sort)
  "$PY" bench/compare_cuobjdump.py "$K" cuobjdump "${mods[@]}"
  "$K" arch --arch 9.0 "${mods[@]}" | head -40
  ;;
cross)
  step "flashinfer's JIT modules (silu, norm, decode) compiled for 12.0f through kiln's proof script"
  rm -rf /tmp/jit120
  KILN_JIT_DIR=/tmp/jit120 FLASHINFER_CUDA_ARCH_LIST=12.0f MAX_JOBS=16 FLASHINFER_NVCC_THREADS=1 \
    KILN_JIT_KERNELS=silu,norm,decode timed "$PY" -I -B recipes/jit/flashinfer.py 2>&1 | grep -E '^\{|error|Error' | tail -20
  step "CuTe DSL kernels compiled for sm_120a: the toy add kernel, and flashinfer's b12x kernel"
  rm -rf /tmp/cute120
  KILN_JIT_DIR=/tmp/cute120 KILN_TARGET_ARCHS=12.0 timed "$PY" -I -B recipes/jit/cutlass-dsl.py 2>&1 | tail -5
  if [ -f bench/h200/cute_sm120.py ]; then
    timed "$PY" bench/h200/cute_sm120.py /tmp/cute120/b12x 2>&1 | tail -5
  fi
  step "kiln arch against cuobjdump, every binary compiled for 12.0"
  mapfile -t bins < <(find /tmp/jit120 /tmp/cute120 \( -name '*.so' -o -name '*.cubin' \) | sort)
  "$PY" bench/compare_cuobjdump.py "$K" cuobjdump "${bins[@]}"
  "$K" arch --arch 12.0 "${bins[@]}" | head -60
  step "kiln doctor --arch 12.0"
  timed k doctor 'flashinfer[cutedsl]' --arch 12.0 --json > "$OUT/doctor-12.0.json"
  verdicts "$OUT/doctor-12.0.json"
  ;;
aot)
  step "kiln install flashinfer --aot --arch 9.0 (no network)"
  timed k install flashinfer --aot --arch 9.0 --offline 2>&1 | tail -25
  step "first-call latency: cold JIT, kiln's warm cache, JIT-workspace hit (fresh processes)"
  timed "$PY" bench/flashinfer_first_call.py --arch 9.0a --json "$OUT/first-call.json" 2>&1 | tail -30
  ;;
*)
  echo "usage: $0 install|gpu|cross|aot" >&2
  exit 2
  ;;
esac
