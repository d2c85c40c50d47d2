#!/usr/bin/env bash
# Second H200 run: kiln arch vs cuobjdump on every CUDA library of the image's torch and CUDA,
# warm-doctor timings, and the raw tool outputs, packed into one archive under $OUT.
set -u
K=${KILN:-./target/release/kiln}
D=/tmp/h200; mkdir -p $D
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
nvidia-smi > $D/nvidia-smi.txt 2>&1
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > $D/nvidia-smi-query.txt
cat /proc/driver/nvidia/version > $D/proc-driver-version.txt
nvcc --version > $D/nvcc-version.txt
g++ --version > $D/gxx-version.txt
PY=$(which python3)
TLIB=$($PY -c "import torch,os;print(os.path.join(os.path.dirname(torch.__file__),'lib'))")
FILES=$(ls $TLIB/*.so /usr/local/cuda/lib64/lib*.so.1[0-9].* 2>/dev/null | xargs -n1 readlink -f | sort -u)
python3 bench/compare_cuobjdump.py $K cuobjdump $FILES > $D/compare.txt 2>&1
for f in $(readlink -f $TLIB/libtorch_cuda.so /usr/local/cuda/lib64/libcublasLt.so.13); do
  echo "$f $(stat -c %s $f) bytes" >> $D/timing.txt
  for i in 1 2 3 4 5; do echo "kiln arch (ms): $(ms $K arch $f)" >> $D/timing.txt; done
  for i in 1 2 3; do echo "cuobjdump --list-elf (ms): $(ms cuobjdump --list-elf $f)" >> $D/timing.txt; done
done
$K --python $PY --cache-dir /tmp/kc doctor --arch 12.0 > $D/doctor-all-120.txt 2>&1
$K --python $PY --cache-dir /tmp/kc doctor torch --json > $D/doctor-torch.json 2>&1
echo "cold (ms): $(ms $K --python $PY --cache-dir /tmp/kc doctor torch --refresh)" >> $D/doctor-timing.txt
for i in $(seq 10); do echo "warm (ms): $(ms $K --python $PY --cache-dir /tmp/kc doctor torch)" >> $D/doctor-timing.txt; done
$K --python $PY --cache-dir /tmp/kc doctor torch --json | grep probe_cache >> $D/doctor-timing.txt
tar -C /tmp -czf $OUT/h200.tar.gz h200
tail -5 $D/compare.txt; cat $D/timing.txt $D/doctor-timing.txt
