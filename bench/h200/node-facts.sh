#!/usr/bin/env bash
# The H200's own facts for planning elsewhere (issue 20, step 1): `kiln doctor --json` on the
# node, kept as node.json, with `doctor` for 9.0 and 12.0 in words. On the connected machine the
# plan for that node is then `kiln plan 'sglang==0.5.11' --for node.json` (docs/gpu-proof.md).
# kiln arrives as .device-bin/kiln (a release build, carried); nothing is installed.
set -uo pipefail
K=${KILN:-$PWD/.device-bin/kiln}
PY=${PY:-/opt/torch/.venv/bin/python3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CACHE=${KILN_CACHE:-/tmp/kiln-cache}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
cp "$K" /tmp/kiln && chmod +x /tmp/kiln
k() { /tmp/kiln --python "$PY" --cache-dir "$CACHE" --no-progress "$@"; }
printf '== nvidia-smi\n'; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
printf '\n== nvcc\n'; nvcc --version | tail -2
printf '\n== kiln doctor --json (node facts)\n'
start=$(date +%s%N)
k doctor --json torch > /tmp/h200-node.json; rc=$?
# 19.7 MB with its per-binary list (2026-12-03): over what a call brings back, so gzip'd
gzip -9 -c /tmp/h200-node.json > "$OUT/h200-node.json.gz"
ms=$((($(date +%s%N) - start) / 1000000)); printf "exit %d in %d.%03d s\n" "$rc" $((ms / 1000)) $((ms % 1000))
"$PY" - /tmp/h200-node.json <<'PYEOF'
import json, sys
n = json.load(open(sys.argv[1]))["node"]
m = n["machine"]
print("host", n["host"], "| gpus", [g["arch"] for g in m["gpus"]], "| driver", m["driver"], "| driver_cuda", m["driver_cuda"])
print("toolkit", (m.get("cuda_toolkit") or {}).get("version"), "| python", n["python"]["python"]["version"], "| dists", len(n["python"]["dists"]))
print("tags", len(n["tags"]), n["tags"][:3], "| loader libraries", len(n["system_libraries"] or []), "| libnuma.so.1" , "libnuma.so.1" in (n["system_libraries"] or []))
PYEOF
printf '\n== kiln doctor torch --arch 9.0\n'; k doctor torch --arch 9.0 2>&1 | sed -n '/^components/,$p'
printf '\n== kiln doctor torch --arch 12.0\n'; k doctor torch --arch 12.0 2>&1 | sed -n '/^components/,$p'
