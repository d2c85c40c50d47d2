#!/usr/bin/env bash
# flash-attn 2.8.3.post2 built from its sdist by kiln on an H200 machine (sm_90, CUDA 13.0,
# torch 2.11.0 in /opt/torch/.venv, no network), then run on the GPU against torch SDPA; and
# translation units for 12.0 (no SM120 GPU here) read back by kiln and by cuobjdump.
#
# What travels (bench/h200/flash-attn-prep.sh makes it on a connected machine, in .fa/):
#   .fa/kiln         kiln's release build
#   .fa/seed.tar     a kiln cache seeded with the sdist (sources/<sha256>/) and the build and run
#                    requirements as wheels (wheelhouse/), so `kiln install --offline` needs nothing
# Steps, each inside one 10-minute call of the device tool:
#   start SECONDS   copies .fa to /tmp/fa, starts `kiln install flash-attn --arch 9.0 --offline`
#                   in its own session (it outlives the call while the machine stays warm) with a
#                   memory sampler beside it, and waits up to SECONDS for it
#   wait SECONDS    waits for that build again (the next call), then prints kiln's summary
#   gpu             flash_attn_func vs torch SDPA on the GPU; kiln doctor --arch 9.0; kiln arch
#                   against cuobjdump on the built extension
#   cross SECONDS   the same build for 12.0 through kiln (its build env), stopped by --limit
#                   after SECONDS; every object it finished is read by kiln and by cuobjdump;
#                   then one kernel unit compiled side by side for 120 alone and for the default
#                   list 80;90;100;120 (time and peak RSS of each)
set -uo pipefail
W=/tmp/fa
PY=${PY:-/opt/torch/.venv/bin/python3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} PYTHONUNBUFFERED=1
export PATH=$CUDA_HOME/bin:$PATH
K=$W/kiln
JOBS=${JOBS:-$(nproc)}
k() { "$K" --python "$PY" --cache-dir "$W/cache" --no-progress "$@"; }

sampler() { # FILE: peak RSS of one compiler process and of all of them together, every second
  local peak1=0 peakall=0 n=0 line
  while sleep 1; do
    line=$(ps -eo rss=,comm= | awk '/cicc|ptxas|nvcc|cc1plus|fatbinary|nvlink/ {s+=$1; if ($1>m) m=$1; c++} END {print m+0, s+0, c+0}')
    set -- $line
    [ "$1" -gt "$peak1" ] && peak1=$1
    [ "$2" -gt "$peakall" ] && peakall=$2
    [ "$3" -gt "$n" ] && n=$3
    printf 'peak one process %d MiB; peak all compilers %d MiB; most compiler processes at once %d\n' \
      $((peak1 / 1024)) $((peakall / 1024)) "$n" > "$1"
  done
}

wait_build() { # SECONDS
  local end=$(($(date +%s) + $1))
  while [ ! -e $W/build.rc ] && [ "$(date +%s)" -lt "$end" ]; do
    sleep 10
    printf '%s %s\n' "$(date +%T)" "$(grep -aoE '\[[0-9]+/[0-9]+\]' $W/build.log | tail -1)"
  done
  cat $W/mem.txt 2>/dev/null
  if [ -e $W/build.rc ]; then
    echo "build exit $(cat $W/build.rc) after $(($(cat $W/build.end) - $(cat $W/build.start))) s"
    grep -aE '^kiln:|^error|^  (status|log|environment)' $W/build.log | tail -25
    kill "$(cat $W/sampler.pid)" 2>/dev/null
  else
    echo "still building"
  fi
  cp $W/build.log "$OUT/build.log" 2>/dev/null
}

case "${1:-}" in
start)
  rm -rf $W && mkdir -p $W/cache && cp .fa/kiln $W/kiln && tar -xf .fa/seed.tar -C $W/cache
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  echo "cpus $(nproc), jobs $JOBS"; free -g | head -2
  k plan flash-attn --arch 9.0 --offline --jobs "$JOBS"
  (setsid bash -c 'echo $$ > '$W'/sampler.pid; exec bash "$0" sampler '$W'/mem.txt' "$0" </dev/null >/dev/null 2>&1 &)
  date +%s > $W/build.start
  setsid bash -c "'$K' --python '$PY' --cache-dir '$W/cache' --no-progress install flash-attn --arch 9.0 --offline --jobs $JOBS > $W/build.log 2>&1; echo \$? > $W/build.rc; date +%s > $W/build.end" </dev/null >/dev/null 2>&1 &
  wait_build "${2:-540}"
  ;;
sampler) sampler "$2" ;;
wait) wait_build "${2:-540}" ;;
gpu)
  "$PY" bench/h200/flash_attn_gpu.py 2>&1 | tee "$OUT/gpu.jsonl"
  k doctor flash-attn --arch 9.0
  so=$("$PY" -c "import torch, flash_attn_2_cuda; print(flash_attn_2_cuda.__file__)")
  ls -la "$so"
  "$K" arch --arch 9.0,12.0 "$so"
  "$PY" bench/compare_cuobjdump.py "$K" cuobjdump "$so"
  ;;
cross)
  s=$(date +%s)
  k install flash-attn --arch 12.0 --offline --jobs "$JOBS" --limit "${2:-240}s" > $W/cross.log 2>&1
  echo "kiln install --arch 12.0 stopped after $(($(date +%s) - s)) s (exit $?)"
  grep -aE '^kiln:|^error|status:|environment:' $W/cross.log | tail -8
  ninja=$(ls -t $W/cache/work/flash-attn-*/src/*/build/temp*/build.ninja | head -1)
  grep -m1 -oE -- '-gencode arch=[^ ]+' "$ninja"
  mapfile -t objs < <(find "$(dirname "$ninja")" -name '*.o' -size +1k | sort)
  echo "${#objs[@]} objects finished for 12.0"
  "$K" arch --arch 12.0 "${objs[@]}" | head -30
  "$PY" bench/compare_cuobjdump.py "$K" cuobjdump "${objs[@]}"
  bash bench/h200/narrowing.sh "$ninja" csrc/flash_attn/src/flash_fwd_hdim128_bf16_sm80.cu
  ;;
*) sed -n '2,27p' "$0"; exit 2 ;;
esac
