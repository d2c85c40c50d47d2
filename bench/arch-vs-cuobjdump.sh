#!/usr/bin/env bash
# Benchmark: `kiln arch` vs `cuobjdump --list-elf` on libcublasLt from the nvidia-cublas wheel
# (~550 MB), both on a warm page cache, plus an arch-set comparison with cuobjdump's full
# listing. Needs network to PyPI once; everything lands in target/bench.
set -euo pipefail
cd "$(dirname "$0")/.."
B=target/bench; mkdir -p $B
cargo build --release --quiet
[ -x $B/cu13/nvidia/cu13/bin/cuobjdump ] || python3 -m pip install -q --target $B/cu13 nvidia-cuda-cuobjdump
if ! ls $B/cublas/nvidia/cu13/lib/libcublasLt.so.* >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps -d $B/wheels nvidia-cublas
  mkdir -p $B/cublas && (cd $B/cublas && unzip -q -o ../wheels/nvidia_cublas-*.whl 'nvidia/*/lib/libcublasLt.so*')
fi
LIB=$(ls $B/cublas/nvidia/*/lib/libcublasLt.so.* | head -1)
CUOBJDUMP=$B/cu13/nvidia/cu13/bin/cuobjdump
echo "file: $LIB ($(stat -c %s "$LIB") bytes)"
python3 bench/compare_cuobjdump.py target/release/kiln $CUOBJDUMP "$LIB"
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
for i in 1 2 3 4 5; do echo "kiln arch: $(ms target/release/kiln arch "$LIB") ms"; done
for i in 1 2 3; do echo "cuobjdump --list-elf: $(ms $CUOBJDUMP --list-elf "$LIB") ms"; done
