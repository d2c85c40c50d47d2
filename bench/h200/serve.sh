#!/usr/bin/env bash
# The serving proof on the H200 (issue 20): SGLang 0.5.11 and vLLM 0.20.0 installed by kiln,
# offline, from bundles planned on a connected machine for this node's own facts
# (`kiln bundle --for h200-node.json ...`, docs/gpu-proof.md §9), then `kiln doctor` for 9.0
# (the serving proof runs: each engine generates tokens on a tiny dense and a tiny MoE model)
# and for 12.0 (per-binary and backend verdicts; no SM120 GPU here, so no serving proof).
#
# Each call carries one part of a bundle in .dev/p/ (and, once, kiln in .device-bin/kiln):
#   bench/h200/serve.sh carry            keep the carried part in /tmp/parts (a part already
#                                        there is not sent again: `ls` says which are there)
#   bench/h200/serve.sh sglang           install the SGLang bundle into the machine's torch
#                                        environment, doctor 9.0 and 12.0
#   bench/h200/serve.sh vllm             the same for vLLM, into a copy of that environment
#                                        made before SGLang changed it (the two pin
#                                        incompatible llguidance versions)
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
doctor() { # python target
  local py=$1 target=$2
  for arch in 9.0 12.0; do
    step "kiln doctor $target --arch $arch"
    timed k "$py" doctor "$target" --arch "$arch" --json > "/tmp/doctor-$target-$arch.json"
    verdicts "/tmp/doctor-$target-$arch.json"
    trimmed "/tmp/doctor-$target-$arch.json" "$OUT/doctor-$target-$arch.json"
  done
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
  if [ ! -d "$VLLM_ENV" ]; then
    # A copy of the machine's torch environment as it came, for vLLM (hard links where /tmp
    # shares the file system; pip and uv replace a file by unlinking it first).
    step "copy of $TORCH_ENV for vLLM"
    timed sh -c "cp -al $TORCH_ENV $VLLM_ENV 2>/dev/null || (rm -rf $VLLM_ENV; cp -a $TORCH_ENV $VLLM_ENV)"
    sed -i "s|$TORCH_ENV|$VLLM_ENV|g" "$VLLM_ENV/bin/activate" 2>/dev/null
  fi
  for f in .dev/p/*; do [ -f "$f" ] && cp "$f" "$PARTS/"; done
  ls "$PARTS" | tr '\n' ' '; echo
  df -h /tmp | tail -1
  ;;
sglang)
  step "machine"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$TORCH_ENV/bin/python3" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  step "kiln install --bundle (no network here)"
  mkdir -p /tmp/sglang-run && cd /tmp/sglang-run
  first=$(ls "$PARTS"/sglang*.tar.01-of-* | head -1)
  timed k "$TORCH_ENV/bin/python3" install --bundle "$first" 2>&1 | tee "$OUT/install-sglang.log"
  cp kiln.lock "$OUT/kiln-sglang.lock" 2>/dev/null
  cd - > /dev/null
  doctor "$TORCH_ENV/bin/python3" sglang
  diagnose "$TORCH_ENV/bin/python3" sglang
  ;;
vllm)
  step "kiln install --bundle into $VLLM_ENV (no network here)"
  mkdir -p /tmp/vllm-run && cd /tmp/vllm-run
  first=$(ls "$PARTS"/vllm.tar.*-of-* | head -1)
  timed k "$VLLM_ENV/bin/python3" install --bundle "$first" 2>&1 | tee "$OUT/install-vllm.log"
  cp kiln.lock "$OUT/kiln-vllm.lock" 2>/dev/null
  cd - > /dev/null
  doctor "$VLLM_ENV/bin/python3" vllm
  diagnose "$VLLM_ENV/bin/python3" vllm
  ;;
*)
  echo "usage: $0 carry|sglang|vllm" >&2
  exit 2
  ;;
esac
