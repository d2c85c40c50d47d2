#!/usr/bin/env bash
# The serving proof on the H200 (issue 20) and the lock that reproduces it (issue 19): SGLang
# 0.5.11 and vLLM 0.20.0 installed by kiln, offline, from bundles planned on a connected machine
# for this node's own facts (`kiln bundle --for h200-node.json ...`, docs/gpu-proof.md §9), then
# `kiln doctor` for 9.0 (the serving proof runs: each engine generates tokens on a tiny dense and
# a tiny MoE model) and for 12.0 (per-binary and backend verdicts; no SM120 GPU here, so no
# serving proof).
#
# Each call carries one part of a bundle in a folder .dev/NN/ that `carry` names (and, once,
# kiln in .device-bin/kiln); each
# step below fits one 10-minute call:
#   bench/h200/serve.sh carry             keep the carried part in /tmp/parts (a part already
#                                         there is not sent again: `ls` says which are there);
#                                         the first call copies the machine's torch environment
#                                         for vLLM, for flashinfer (bench/h200/run.sh) and for the
#                                         lock's reproduction, before anything changes it
#   bench/h200/serve.sh install ENGINE    kiln install --bundle: sglang into the machine's torch
#                                         environment, vllm into its copy (the two pin
#                                         incompatible llguidance versions)
#   bench/h200/serve.sh start ENGINE ARGS the same install, detached, with more kiln arguments
#                                         (`--aot-module cutlass_fused_moe`: longer than a call)
#   bench/h200/serve.sh aot ENGINE [ARGS]  flashinfer's fused MoE AOT module there, detached
#   bench/h200/serve.sh wait ENGINE|aot [SECS]  until it is done: its log, the AOT compile's progress
#   bench/h200/serve.sh doctor ENGINE ARCH
#   bench/h200/serve.sh diagnose ENGINE   where the serving proof did not pass: run it by hand
#   bench/h200/serve.sh locked ENGINE LOCK  a lock kiln wrote on an earlier machine (its proven
#                                         kiln.lock, in docs/gpu-proof/), reproduced on this one:
#                                         the bundle seeds the cache (install --bundle --dry-run
#                                         changes no environment), then install --locked
#                                         --offline of LOCK into a fresh copy of the torch
#                                         environment
#   bench/h200/serve.sh relock            kiln lock of the SGLang environment, then
#                                         install --locked --offline of that lock into a fresh
#                                         copy of the torch environment, and doctor there
set -uo pipefail
PARTS=/tmp/parts
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" "$PARTS"
CACHE=${KILN_CACHE:-/tmp/kiln-cache}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
export PYTHONUNBUFFERED=1
TORCH_ENV=/opt/torch/.venv
VLLM_ENV=/tmp/venv-vllm
FRESH_ENV=/tmp/venv-fresh
env_of() { case "$1" in sglang) echo "$TORCH_ENV" ;; vllm) echo "$VLLM_ENV" ;; *) echo "no engine $1" >&2; exit 2 ;; esac; }
step() { printf '\n== %s\n' "$*"; }
timed() { # runs "$@" and prints its wall time
  local s rc ms
  s=$(date +%s%N)
  "$@"
  rc=$?
  ms=$((($(date +%s%N) - s) / 1000000))
  printf '   (%d.%03d s, exit %d)\n' $((ms / 1000)) $((ms % 1000)) "$rc" >&2
  return "$rc"
}
k() { local py=$1; shift; /tmp/kiln --python "$py" --cache-dir "$CACHE" --no-progress "$@"; }
verdicts() { # doctor --json FILE: one line per component
  "$TORCH_ENV/bin/python3" - "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d.get("components", []):
    print(f"  {c['name']:14} {c['status']:10} {c.get('evidence', '')[:700]}")
PYEOF
}
trimmed() { # doctor --json IN OUT: without the node's facts and the per-binary list (16 MB), which
  # stay in /tmp on the machine; the components' evidence names the binaries that decide them
  "$TORCH_ENV/bin/python3" - "$1" "$2" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
d.pop("node", None)
b = d.pop("binaries", None)
d["binaries_left_out"] = f"{len(b or [])} per-binary entries left out of this record (size)"
json.dump(d, open(sys.argv[2], "w"), indent=1)
PYEOF
}
doctor() { # python target arch
  local py=$1 target=$2 arch=$3
  step "kiln doctor $target --arch $arch"
  timed k "$py" doctor "$target" --arch "$arch" --json > "/tmp/doctor-$target-$arch.json"
  verdicts "/tmp/doctor-$target-$arch.json"
  trimmed "/tmp/doctor-$target-$arch.json" "$OUT/doctor-$target-$arch.json"
}
copy_env() { # a copy of the machine's torch environment as it came (hard links where /tmp
  # shares the file system; pip and uv replace a file by unlinking it first)
  local to=$1
  [ -d "$to" ] && return 0
  step "copy of $TORCH_ENV as $to"
  timed sh -c "cp -al $TORCH_ENV $to 2>/dev/null || (rm -rf $to; cp -a $TORCH_ENV $to)"
  sed -i "s|$TORCH_ENV|$to|g" "$to/bin/activate" "$to/pyvenv.cfg" 2>/dev/null
}

detached() { # run-dir python kiln-args...: kiln in its own session, logging to run-dir/install.log
  local run=$1 py=$2
  shift 2
  mkdir -p "$run" && cd "$run" && rm -f done
  printf '%s\n' "kiln $*" > install.log
  setsid nohup bash -c 's=$(date +%s%N); "$@" >> install.log 2>&1; rc=$?
    ms=$((($(date +%s%N) - s) / 1000000)); printf "   (%d.%03d s, exit %d)\n" $((ms / 1000)) $((ms % 1000)) $rc >> install.log; touch done' \
    _ /tmp/kiln --python "$py" --cache-dir "$CACHE" --no-progress "$@" < /dev/null > /dev/null 2>&1 &
  echo "started: $(cat install.log)"
}

diagnose() { # python engine: where the serving proof did not pass, its whole output and kiln's logs
  local py=$1 engine=$2
  grep -q '"served"' "/tmp/doctor-$engine-9.0.json" && return 0
  step "the serving proof by hand (it did not pass in kiln)"
  KILN_COMPONENT=$engine timeout 400 "$py" -I -B recipes/serve/engine.py > "$OUT/serve-$engine.log" 2>&1
  echo "exit $?"; tail -40 "$OUT/serve-$engine.log"
  tar czf "$OUT/logs-$engine.tgz" -C "$CACHE" logs 2>/dev/null
}

case "${1:-}" in
carry)
  if [ -f .device-bin/kiln ]; then cp .device-bin/kiln /tmp/kiln && chmod +x /tmp/kiln; fi
  for e in "$VLLM_ENV" /tmp/venv-fi "$FRESH_ENV"; do copy_env "$e"; done
  for f in .dev/*/*; do [ -f "$f" ] && cp "$f" "$PARTS/"; done
  ls "$PARTS" | tr '\n' ' '; echo
  df -h /tmp | tail -1
  ;;
install)
  engine=$2 py="$(env_of "$2")/bin/python3"
  step "machine"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$py" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  step "kiln install --bundle into $(env_of "$engine") (no network here)"
  mkdir -p "/tmp/$engine-run" && cd "/tmp/$engine-run"
  first=$(ls "$PARTS/$engine".tar.*-of-* | sort -V | head -1)
  timed k "$py" install --bundle "$first" 2>&1 | tee "$OUT/install-$engine.log"
  cp kiln.lock "$OUT/kiln-$engine.lock" 2>/dev/null
  ;;
start)
  # The same install, detached (its own session, so it outlives this call: the machine's rule for
  # processes a command leaves), for an install longer than one 10-minute call, e.g. with
  # `--aot-module cutlass_fused_moe`: then `serve.sh wait ENGINE` until it is done.
  engine=$2 py="$(env_of "$2")/bin/python3"
  shift 2
  first=$(ls "$PARTS/$engine".tar.*-of-* | sort -V | head -1)
  detached "/tmp/$engine-run" "$py" install --bundle "$first" "$@"
  ;;
aot)
  # flashinfer's on-request AOT module in ENGINE's environment, detached: `kiln install flashinfer
  # --offline --aot-module cutlass_fused_moe ARGS` (nothing to install; the modules compile); then
  # `serve.sh wait aot`.
  py="$(env_of "$2")/bin/python3"
  shift 2
  detached /tmp/aot-run "$py" install flashinfer --offline --aot-module cutlass_fused_moe "$@"
  ;;
wait)
  # Until the detached run (`start ENGINE` or `aot`) is done, or SECS (default 560) have passed:
  # its log so far, and how far an AOT compile is (objects in kiln's work directory).
  name=$2 run=/tmp/$2-run
  for _ in $(seq "${3:-560}"); do [ -f "$run/done" ] && break; sleep 1; done
  [ -f "$run/done" ] && echo "done" || echo "still running"
  for d in $(find "$CACHE/work" -type d -path '*cached_ops/*' -prune 2>/dev/null); do
    echo "objects in $d: $(find "$d" -name '*.o' | wc -l)"
  done
  cp "$run/install.log" "$OUT/install-$name.log"
  tail -60 "$run/install.log"
  [ -f "$run/kiln.lock" ] && cp "$run/kiln.lock" "$OUT/kiln-$name.lock"
  ;;
doctor)
  engine=$2 py="$(env_of "$2")/bin/python3"
  doctor "$py" "$engine" "$3"
  ;;
diagnose)
  diagnose "$(env_of "$2")/bin/python3" "$2"
  ;;
locked)
  engine=$2 lock=$(realpath "$3")
  first=$(ls "$PARTS/$engine".tar.*-of-* | sort -V | head -1)
  step "the bundle into the cache: kiln install --bundle --dry-run (no environment changes)"
  mkdir -p /tmp/seed && cd /tmp/seed
  timed k "$FRESH_ENV/bin/python3" install --bundle "$first" --dry-run 2>&1 | tail -5
  step "kiln install --locked $lock --offline into a fresh copy of the torch environment"
  mkdir -p /tmp/locked && cd /tmp/locked && cp "$lock" kiln.lock
  timed k "$FRESH_ENV/bin/python3" install --locked --offline 2>&1 | tee "$OUT/install-locked-$engine.log" | grep -v '^kiln:' | tail -40
  "$FRESH_ENV/bin/python3" -m pip list 2>/dev/null | grep -i -E '^(sglang|flashinfer|nvidia-cutlass-dsl |torch |vllm)'
  ;;
relock)
  step "kiln lock of the SGLang environment"
  mkdir -p /tmp/relock && cd /tmp/relock
  timed k "$TORCH_ENV/bin/python3" lock sglang -o kiln.lock 2>&1 | tail -20
  cp kiln.lock "$OUT/kiln-sglang-relocked.lock" 2>/dev/null
  step "kiln install --locked --offline into a fresh copy of the torch environment"
  timed k "$FRESH_ENV/bin/python3" install --locked --offline 2>&1 | tee "$OUT/install-locked.log" | tail -30
  step "pip list of the two, compared"
  diff <("$TORCH_ENV/bin/python3" -m pip list --format=freeze 2>/dev/null) \
    <("$FRESH_ENV/bin/python3" -m pip list --format=freeze 2>/dev/null) && echo "same distributions and versions"
  ;;
*)
  echo "usage: $0 carry | install ENGINE | start ENGINE [ARGS] | aot ENGINE [ARGS] | wait ENGINE|aot [SECS] | doctor ENGINE ARCH | diagnose ENGINE | locked ENGINE LOCK | relock" >&2
  exit 2
  ;;
esac
