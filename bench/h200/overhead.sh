#!/usr/bin/env bash
# Issue 24, item 4 on the H200 (16 cores, quiet): N independent ~4 s C-extension builds by
# `kiln install --jobs 1` against the ideal schedule of their compile steps
# (bench/overhead/bench.py, the same packages and rules as on the connected machine). The
# machine has no network, so the one build requirement (setuptools) comes from a carried
# wheelhouse through uv's own settings (UV_OFFLINE, UV_FIND_LINKS; with UV_NO_INDEX instead, uv
# 0.13.9 went to PyPI there), and kiln's uv is the carried binary linked into each fresh cache, as
# bench.py does everywhere.
#
# usage: bench/h200/overhead.sh DIR
#   DIR holds `uv` (or `uv.gz`) and `wh/setuptools-*.whl`, carried as an ignored folder; with
#   `kiln-before.gz` and `kiln-after.gz` in it both binaries run side by side in one run (else
#   $KILN alone, as "after").
set -u
D=$(realpath "${1:?usage: $0 DIR}")
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/uv-0.13.9
if [ -f "$D/uv.gz" ]; then gunzip -c "$D/uv.gz" > /tmp/uv-0.13.9/uv; else cp "$D/uv" /tmp/uv-0.13.9/uv; fi
chmod +x /tmp/uv-0.13.9/uv
mkdir -p /tmp/wh && cp "$D"/wh/*.whl /tmp/wh/
KILNS=()
for k in before after; do
  if [ -f "$D/kiln-$k.gz" ]; then
    gunzip -c "$D/kiln-$k.gz" > "/tmp/kiln-$k" && chmod +x "/tmp/kiln-$k"
    KILNS+=(--kiln "$k=/tmp/kiln-$k")
  fi
done
[ ${#KILNS[@]} -gt 0 ] || KILNS=(--kiln "after=${KILN:-/tmp/kiln}")
export UV_OFFLINE=1 UV_FIND_LINKS=/tmp/wh
export BENCH_PYTHON=${BENCH_PYTHON:-/opt/torch/.venv/bin/python3}
nproc
uptime
python3 bench/overhead/bench.py "${KILNS[@]}" --n "${N1:-4}" --n "${N2:-16}" --repeat "${REPEAT:-3}" \
  --uv /tmp/uv-0.13.9/uv --out /tmp 2>&1 | tee "$OUT/overhead.jsonl"
uptime
