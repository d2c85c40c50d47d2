#!/bin/sh
# First-call latency of flashinfer kernels with a cold JIT cache and with kiln's warm cache, on
# a GPU, in the environment kiln installed. Usage: bench/flashinfer_first_call.sh PYTHON ARCH [KILN]
#   e.g. bench/flashinfer_first_call.sh /venv/bin/python 9.0a ./kiln
# Runs `kiln install flashinfer --aot --arch <major.minor>` first when KILN is given (offline is
# fine once the cache holds the modules or a toolkit is here), then the benchmark; writes
# first-call-<arch>.json next to where it is run.
set -eu
PY=$1; ARCH=$2; KILN=${3:-}
if [ -n "$KILN" ]; then
  "$KILN" --python "$PY" install flashinfer --aot --arch "$(echo "$ARCH" | sed 's/[af]\( \|$\)/\1/g; s/ /,/g')"
fi
exec "$PY" "$(dirname "$0")/flashinfer_first_call.py" --arch "$ARCH" --python "$PY" \
  --json "first-call-$(echo "$ARCH" | tr ' ' '_').json"
