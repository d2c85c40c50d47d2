#!/usr/bin/env bash
# Issue 24, item 5: `kiln install` of a component that needs no build, against uv installing the
# same wheels plus the import kiln's verification runs, side by side, ROUNDS rounds alternating,
# each in a fresh venv, every wheel already in uv's cache (a first, untimed round fills it).
#   bench/install-vs-uv.sh [ROUNDS]     (default 5)
# Environment: KILN (default target/release/kiln), PY (a Python 3.12), UV (default kiln's uv).
set -euo pipefail
ROUNDS=${1:-5}
KILN=${KILN:-$PWD/target/release/kiln}
PY=${PY:-$(ls -d ~/.pyenv/versions/3.12*/bin/python 2>/dev/null | head -1)}
UV=${UV:-$(ls -d ~/.cache/kiln/tools/uv-*/uv 2>/dev/null | head -1)}
SPEC='nvidia-cutlass-dsl[cu13]==4.8.1'   # what recipes/cutlass-dsl.toml installs for --arch 12.0
IMPORT='import cutlass, cutlass.cute'     # what its [verify] imports
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
uv_round() {
  rm -rf "$W/u" && "$PY" -m venv "$W/u"
  local s=$(date +%s%N)
  "$UV" pip install -q --python "$W/u/bin/python" "$SPEC" && "$W/u/bin/python" -c "$IMPORT"
  ms "$s"
}
kiln_round() {
  rm -rf "$W/k" && "$PY" -m venv "$W/k"
  local s=$(date +%s%N)
  "$KILN" --python "$W/k/bin/python" -q install cutlass-dsl --arch 12.0 --no-jit-proof > /dev/null
  ms "$s"
}
uv_round > /dev/null; kiln_round > /dev/null   # fill the caches
echo "round  uv+import  kiln  ratio"
us=(); ks=()
for r in $(seq "$ROUNDS"); do
  u=$(uv_round); k=$(kiln_round); us+=("$u"); ks+=("$k")
  printf '%5d  %6d ms  %6d ms  %.2f\n' "$r" "$u" "$k" "$(awk "BEGIN {print $k / $u}")"
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mu=$(med "${us[@]}"); mk=$(med "${ks[@]}")
printf 'median  %6d ms  %6d ms  %.2f   (load %s)\n' "$mu" "$mk" "$(awk "BEGIN {print $mk / $mu}")" "$(cut -d' ' -f1-3 /proc/loadavg)"
