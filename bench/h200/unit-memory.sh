#!/usr/bin/env bash
# Issue 24, item 6 on a GPU machine (16 cores, no network): real flash-attn 2.8.3.post2 kernel
# units (bench/fa-units: two of them as one torch extension, flash-attn's own nvcc flags) built
# by `kiln install` at one memory limit, through kiln's memory gate:
#   r1  two units narrowed (--arch 9.0), planned by the recipe's one figure per job
#       (flash-attn's 10 GiB)
#   r2  the same again, planned by the figures per unit r1 measured (its cache's memory/ copied)
#   r3  one unit (hdim32) for the default arch list (8.0,9.0,10.0,12.0: flash-attn's own,
#       setup.py:69-70), by the recipe's figure; both units for that list would not fit one
#       session of the device tool (each takes over 300 s and at 12 GiB they run one at a time)
#   r5  the same unit narrowed, by the recipe's figure: the unit side by side with r3
# Each run has its own kiln cache (so no wheel comes from the wheel cache) and starts with the
# extension uninstalled. What travels (make it on a connected machine, in .dev/um, ignored):
#   kiln.gz uv.gz      kiln's release build and uv 0.13.9 (its PyPI wheel), gzipped
#   fa.tar.gz          flash-attn 2.8.3.post2's sdist (recipes/flash-attn.toml's URL and sha256)
#   *.whl              setuptools and ninja for Python 3.12 (the build's requirements)
# usage (device tool, carry .dev/um):
#   OUT=$OUT bash bench/h200/unit-memory.sh start .dev/um SECONDS   copy, start in the background, wait
#   OUT=$OUT bash bench/h200/unit-memory.sh wait SECONDS            wait again, then report
set -u
W=/tmp/um
OUT=${OUT:-/tmp/out}
PY=${PY:-/opt/torch/.venv/bin/python3}
LIMIT=${LIMIT:-12GiB}
UNITS=${UNITS:-flash_fwd_hdim32_fp16_sm80.cu flash_fwd_hdim64_fp16_sm80.cu}
ONE=${ONE:-flash_fwd_hdim32_fp16_sm80.cu}
mkdir -p "$OUT"

recipe() { # UNITS: the bench recipe, with this machine's paths
  mkdir -p $W/recipes
  cat > $W/recipes/fa-units.toml <<EOF
[package]
name = "fa-units"
version = "0.1.0"
summary = "bench: flash-attn 2.8.3.post2 kernel units as one torch extension"

[source]
path = "$W/fa-units"

[requires]
cuda = ">=12.8"

[build]
requires = ["setuptools", "ninja"]
env = { FA_SRC = "$W/flash_attn-2.8.3.post2", FA_UNITS = "$1", FA_ARCHS = "{arch.flash_attn}", MAX_JOBS = "{jobs}", NVCC_THREADS = "2" }
# flash-attn's recipe figure (recipes/flash-attn.toml): 3-5 GB per nvcc thread, two threads.
memory_per_job = "10GiB"

[verify]
imports = ["fa_units"]
EOF
}

k() { # CACHE ARGS...
  local c=$1
  shift
  mkdir -p "$c/wheelhouse" && cp $W/wh/*.whl "$c/wheelhouse/"
  $W/bin/kiln --python "$PY" --recipes $W/recipes --cache-dir "$c" --no-progress --offline "$@"
}

one() { # NAME CACHE ARCHS [FIGURES_FROM]
  local name=$1 c=$W/$2 archs=$3
  [ -n "${4:-}" ] && mkdir -p "$c" && cp -r "$W/$4/memory" "$c/"
  "$W/bin/uv" pip uninstall --python "$PY" fa-units >/dev/null 2>&1
  k "$c" plan fa-units --arch "$archs" --memory-limit "$LIMIT" | grep -E 'build|jobs|MAX_JOBS|memory' > $W/$name.plan
  local t0=$(date +%s.%N)
  k "$c" install fa-units --arch "$archs" --memory-limit "$LIMIT" --json > $W/$name.json 2> $W/$name.err
  local rc=$?
  local t1=$(date +%s.%N)
  echo "$name rc $rc wall $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s" > $W/$name.done
}

report() {
  for r in r1 r2 r3 r5; do
    [ -e $W/$r.done ] || continue
    echo "== $r: $(cat $W/$r.done)"
    cat $W/$r.plan
    logs=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["logs"])' $W/$r.json 2>/dev/null)
    grep -h '"phase"\|"finished"' "$logs/events.jsonl" 2>/dev/null | grep fa-units | cut -c1-220 | tail -8
    grep -h 'kiln gate' "$logs/fa-units.wheel.log" 2>/dev/null | head -5
    cat $W/c$r/memory/*/fa-units@*.units.json 2>/dev/null
    tail -3 $W/$r.err
    cp -r "$logs" "$OUT/$r-logs" 2>/dev/null
  done
}

case "${1:-}" in
start)
  P=$(realpath "${2:?usage: $0 start PACK SECONDS}")
  rm -rf $W && mkdir -p $W/bin $W/wh
  gunzip -c "$P/kiln.gz" > $W/bin/kiln && gunzip -c "$P/uv.gz" > $W/bin/uv && chmod +x $W/bin/*
  cp "$P"/*.whl $W/wh/ && tar -xzf "$P/fa.tar.gz" -C $W && cp -r bench/fa-units $W/fa-units
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "cpus $(nproc)"; free -g | head -2; /usr/local/cuda/bin/nvcc --version | tail -1
  setsid bash "$0" run </dev/null > $W/run.log 2>&1 &
  sleep 2
  set -- wait "${3:-540}"
  ;&
wait)
  end=$(($(date +%s) + ${2:-540}))
  while [ ! -e $W/all.done ] && [ "$(date +%s)" -lt "$end" ]; do
    sleep 15
    echo "$(date +%T) $(ls $W/*.done 2>/dev/null | xargs -n1 basename 2>/dev/null | tr '\n' ' ') $(tail -c 300 $W/run.log | tr '\n' ' ' | tail -c 120)"
  done
  report | tee "$OUT/report.txt"
  [ -e $W/all.done ] && echo "all done" || echo "still running"
  ;;
run)
  export PATH=$W/bin:/usr/local/cuda/bin:$PATH CUDA_HOME=/usr/local/cuda UV_OFFLINE=1 UV_FIND_LINKS=$W/wh
  recipe "$UNITS"
  one r1 cr1 9.0
  one r2 cr2 9.0 cr1
  recipe "$ONE"
  one r3 cr3 8.0,9.0,10.0,12.0
  one r5 cr5 9.0
  touch $W/all.done
  ;;
esac
