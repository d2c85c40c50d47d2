#!/usr/bin/env bash
# Runs on the H200 device machine (see .library/device): records the real outputs of the tools
# kiln's machine probe parses, runs kiln doctor against the image's real torch, and times
# `kiln arch` against `cuobjdump` on the largest CUDA libraries there. Writes to $OUT.
set -u
K=${KILN:-./target/release/kiln}
D=$OUT/h200
mkdir -p "$D"
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
{
  nvidia-smi > "$D/nvidia-smi.txt" 2>&1
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > "$D/nvidia-smi-query.txt" 2>&1
  cat /proc/driver/nvidia/version > "$D/proc-driver-version.txt" 2>&1
  nvcc --version > "$D/nvcc-version.txt" 2>&1
  { which nvcc; echo "CUDA_HOME=${CUDA_HOME:-}"; g++ --version | head -1; python3 -V; which python3; } > "$D/tools.txt" 2>&1
} 
PY=$(which python3)
$K --python "$PY" --cache-dir /tmp/kc doctor torch --json > "$D/doctor-torch.json" 2> "$D/doctor-torch.err"
$K --python "$PY" --cache-dir /tmp/kc doctor torch > "$D/doctor-torch.txt" 2>&1
$K --python "$PY" --cache-dir /tmp/kc doctor torch --arch 12.0 > "$D/doctor-torch-120.txt" 2>&1
$K --python "$PY" --cache-dir /tmp/kc doctor sglang --arch 12.0 > "$D/doctor-sglang-120.txt" 2>&1
{
  echo "cold doctor torch (ms): $(ms $K --python "$PY" --cache-dir /tmp/kc2 doctor torch --refresh)"
  for i in 1 2 3 4 5; do echo "warm doctor torch (ms): $(ms $K --python "$PY" --cache-dir /tmp/kc doctor torch)"; done
} > "$D/doctor-timing.txt"
TL=$("$PY" -c "import torch,os;print(os.path.join(os.path.dirname(torch.__file__),'lib','libtorch_cuda.so'))")
LT=$(ls /usr/local/cuda/lib64/libcublasLt.so.* 2>/dev/null | head -1)
: > "$D/arch-timing.txt"
for f in "$TL" "$LT"; do
  [ -f "$f" ] || continue
  n=$(basename "$f")
  echo "$n $(stat -c %s "$f") bytes" >> "$D/arch-timing.txt"
  $K arch --json "$f" > "$D/kiln-arch-$n.json" 2>&1
  cuobjdump "$f" 2>/dev/null | grep -E '^(arch|code version) = ' > "$D/cuobjdump-$n.txt"
  for i in 1 2 3; do echo "kiln arch $n (ms): $(ms $K arch "$f")" >> "$D/arch-timing.txt"; done
  for i in 1 2 3; do echo "cuobjdump --list-elf $n (ms): $(ms cuobjdump --list-elf "$f")" >> "$D/arch-timing.txt"; done
done
ls -la "$D"
cat "$D/doctor-timing.txt" "$D/arch-timing.txt" "$D/nvidia-smi-query.txt" "$D/tools.txt"
head -20 "$D/doctor-torch.txt"
