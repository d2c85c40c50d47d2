#!/usr/bin/env bash
# Fourth H200 run: kiln builds a real torch CUDA extension (bench/torchext) against the torch
# installed there (2.11.0+cu130), for sm_90 and then, cross-compiling, for sm_120; after each
# build kiln's verdicts (doctor, kiln arch) are set beside what the GPU does with the kernel.
# Then the sm_90 build again (from the wheel cache) and a lock.
# Run through the device tool with target/release/kiln carried; results land in $OUT.
set -u
K=${KILN:-$PWD/target/release/kiln}
PY=$(which python3)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
k() { "$K" --recipes bench/torchext/recipes --python "$PY" --cache-dir /tmp/kc --no-progress "$@"; }
smoke() {
  "$PY" - <<'PYEOF'
import torch, kiln_torchext
x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
y = torch.ones_like(x)
try:
    kiln_torchext.axpy(2.0, x, y)
    torch.cuda.synchronize()
    ok = torch.equal(y, 2 * x + 1)
    print("GPU: kernel ran on", torch.cuda.get_device_name(), "- result", "correct" if ok else "WRONG")
except Exception as e:
    print("GPU: kernel failed:", str(e).splitlines()[0])
PYEOF
}
verdicts() {
  for a in 9.0 12.0; do
    k doctor torchext --arch "$a" --json > "$OUT/doctor-$1-$a.json"
    "$PY" -c "import json,sys; d=json.load(open('$OUT/doctor-$1-$a.json')); c=[x for x in d['components'] if x['name']=='torchext'][0]; print('kiln doctor --arch $a: torchext', c['status'], '-', c['evidence'][-220:])"
  done
  SO=$("$PY" -c "import kiln_torchext._axpy as m; print(m.__file__)")
  k arch "$SO" --arch 9.0 | tail -3
  echo "cuobjdump --list-elf:"; cuobjdump --list-elf "$SO" | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/  \1/' | sort | uniq -c
}
echo "== toolchain: $(nvcc --version | tail -1); $("$PY" -c 'import torch; print("torch", torch.__version__)')"
echo "== doctor torch --arch 9.0 (smoke test on the GPU)"; k doctor torch --arch 9.0 --json > "$OUT/doctor-torch.json"
"$PY" -c "import json; d=json.load(open('$OUT/doctor-torch.json')); c=[x for x in d['components'] if x['name']=='torch'][0]; print('torch', c['status'], '-', c['evidence'])"
echo "== plan --arch 9.0"; k plan torchext --arch 9.0
for a in 9.0 12.0 9.0; do
  echo "== install torchext --arch $a"
  k install torchext --arch "$a" --json > "$OUT/install-$a.json"; rc=$?
  "$PY" -c "import json; d=json.load(open('$OUT/install-$a.json')); print('rc=$rc', d.get('result'), [(o['name'], o['result'], o.get('from_cache', False), round(o['seconds'],1)) for o in d.get('outcomes', [])], d.get('failure'))"
  smoke
  verdicts "$a"
done
echo "== lock"; k lock --arch 9.0 -o "$OUT/kiln.lock" && cat "$OUT/kiln.lock"
echo "== install --locked (nothing to do)"; k install --locked --lock "$OUT/kiln.lock"; echo "rc=$?"
