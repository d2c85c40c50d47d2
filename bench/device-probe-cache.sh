#!/usr/bin/env bash
# bench/probe_cache.py on the H200 machine (16 cores) against the Python environment there
# (python3 with torch). Run through the device tool with target/bench-tools carried: `kiln` (this
# branch, release, stripped), `kiln-base` (kiln before the per-component probe cache) and `uv`
# (the PyPI uv wheel's binary). Results land in $OUT.
set -u
T=$PWD/target/bench-tools
PY=$(which python3)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{
  echo "nproc: $(nproc)"; free -g | head -2
  "$PY" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"
  "$T/uv" pip list --python "$PY" 2>/dev/null | wc -l
  "$T/uv" pip install --offline --python "$PY" torch 2>&1 | tail -2
} 2>&1 | tee "$OUT/env.txt"
python3 bench/probe_cache.py --kiln "$T/kiln" --baseline "$T/kiln-base" --python "$PY" --uv "$T/uv" \
  --uv-noop torch --subsets torch --runs 21 --cold-runs 3 --out "$OUT/probe-cache-h200.json" 2>&1 |
  tee "$OUT/probe-cache-h200.txt"
