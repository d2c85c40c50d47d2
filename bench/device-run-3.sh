#!/usr/bin/env bash
# Third H200 run: run rules against the real driver, and torch's ABI facts as kiln records them.
set -u
K=${KILN:-./target/release/kiln}
T=/tmp/rr; mkdir -p $T
for g in "sm_90:arch=compute_90,code=sm_90" "sm_90a:arch=compute_90a,code=sm_90a" "sm_80:arch=compute_80,code=sm_80" \
         "sm_120:arch=compute_120,code=sm_120" "sm_100f:arch=compute_100f,code=sm_100f" "sm_120a:arch=compute_120a,code=sm_120a" \
         "ptx80:arch=compute_80,code=compute_80" "ptx90:arch=compute_90,code=compute_90" "ptx90a:arch=compute_90a,code=compute_90a" \
         "ptx100f:arch=compute_100f,code=compute_100f" "ptx120:arch=compute_120,code=compute_120"; do
  n=${g%%:*}; nvcc --fatbin tests/fixtures/cuda/axpy.cu -o $T/$n.fatbin -gencode ${g#*:} 2>>$T/nvcc.err
done
python3 bench/runrules_on_gpu.py $K $T/*.fatbin
PY=$(which python3)
$K --python $PY --cache-dir /tmp/kc doctor torch --json > $T/doctor.json
python3 - <<'PYEOF'
import json, torch
d = json.load(open("/tmp/rr/doctor.json"))
print("kiln torch facts:", d["torch"])
print("python says:", torch.__version__, torch.version.cuda, torch.version.git_version, torch._C._GLIBCXX_USE_CXX11_ABI, torch._C._cuda_getArchFlags())
PYEOF
