#!/usr/bin/env bash
# vLLM 0.33.0 arch narrowing, measured on real translation units.
#
# WHAT IT MEASURES
#   One (or more) real vLLM 0.33.0 CUDA source files of the _C_stable_libtorch extension, compiled
#   with the nvcc command vLLM's CMake would generate for them, once per arch list, both variants
#   side by side (bench/h200/narrowing.py): wall time, CPU time (user+sys of nvcc and the
#   cicc/ptxas/cudafe++/gcc it waits for), peak RSS (largest single process in that tree, from
#   os.wait4's rusage), object size, and the images `kiln arch` reads from each object.
#     sm120   = what vLLM's CMake emits for TORCH_CUDA_ARCH_LIST=12.0:
#               -gencode arch=compute_120,code=sm_120
#     default = vLLM's full CUDA_SUPPORTED_ARCHS for nvcc >= 13.4 (nvcc here is 13.5):
#               7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.7;11.0;12.0 -> 10 x -gencode arch=compute_XY,code=sm_XY
#     docker  = (only with DOCKER_VARIANT=1) vLLM's release-image TORCH_CUDA_ARCH_LIST
#               7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0 -> 8 gencodes
#
# WHERE THE FLAGS COME FROM (vllm-0.33.0 sdist, file:line)
#   CMakeLists.txt:18       set(CMAKE_CUDA_STANDARD 20)                       -> -std=c++20
#   CMakeLists.txt:119-123  nvcc >= 13.4: CUDA_SUPPORTED_ARCHS "7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.7;11.0;12.0"
#   CMakeLists.txt:129      nvcc 13.0-13.3: "7.5;8.0;8.6;8.7;8.9;9.0;10.0;11.0;12.0"
#   CMakeLists.txt:222-229  torch's gencodes (TORCH_CUDA_ARCH_LIST) are stripped from CMAKE_CUDA_FLAGS,
#                           turned into x.y archs and loosely intersected with CUDA_SUPPORTED_ARCHS
#                           -> CUDA_ARCHS (so 12.0 -> "12.0"; an all-covering list -> all 10 above)
#   CMakeLists.txt:254      get_torch_gpu_compiler_flags -> cmake/utils.cmake:130-148: torch's
#                           COMMON_NVCC_FLAGS, + -DENABLE_FP8 (:140), minus the four
#                           -D__CUDA_NO_HALF*/BFLOAT16* defines for CUDA >= 12 (:143-147)
#                           (torch 2.14's COMMON_NVCC_FLAGS = those four + --expt-relaxed-constexpr)
#   CMakeLists.txt:260      --threads=${NVCC_THREADS}; setup.py:247 defaults it to 1, :316 passes it
#   CMakeLists.txt:269      --compress-mode=size (CUDA >= 13.0)
#   CMakeLists.txt:450,459,463  activation_kernels.cu, pos_encoding_kernels.cu, layernorm_kernels.cu
#                           are in VLLM_STABLE_EXT_SRC
#   CMakeLists.txt:497      -DVLLM_ENABLE_COOPERATIVE_TOPK=1 (COOPERATIVE_TOPK_ARCHS non-empty for both)
#   CMakeLists.txt:622-624  set_gencode_flags_for_srcs(SRCS VLLM_STABLE_EXT_SRC CUDA_ARCHS CUDA_ARCHS)
#                           -> cmake/utils.cmake:328-365 + :301-320: one
#                           "-gencode arch=compute_XY,code=sm_XY" per arch, no PTX (no +PTX here)
#   CMakeLists.txt:1269-1279 define_extension_target(_C_stable_libtorch ... USE_SABI 3 ...)
#                           -> cmake/utils.cmake:629 Python_add_library USE_SABI 3 (-DPy_LIMITED_API=3),
#                           :641 include dir csrc, :654 -DTORCH_EXTENSION_NAME=_C_stable_libtorch
#   CMakeLists.txt:1285-1313 TORCH_TARGET_VERSION=0x020B000000000000ULL, USE_CUDA,
#                           VLLM_ENABLE_COOPERATIVE_TOPK/FUSED_KDA_DECODE/FUSED_GDN_DECODE=1,
#                           CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1
#   setup.py:267            default CMAKE_BUILD_TYPE RelWithDebInfo -> CMake's "-O2 -g -DNDEBUG"
#   docker/Dockerfile:274   release image ARG torch_cuda_arch_list='7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0'
#   torch 2.14 share/cmake/Caffe2/public/cuda.cmake:306-385 adds to CMAKE_CUDA_FLAGS
#                           -DONNX_NAMESPACE=onnx_c2, -Xcudafe --diag_suppress=..., --expt-relaxed-constexpr,
#                           --expt-extended-lambda; Caffe2Targets.cmake:88,108 the torch interface
#                           defines USE_DISTRIBUTED USE_C10D_GLOO USE_RPC USE_TENSORPIPE USE_NVSHMEM USE_C10D_NCCL
#
# DEVIATIONS FROM A REAL `pip install vllm==0.33.0` CONFIGURE (which cannot run here: FetchContent
# needs GitHub)
#   - The compile_commands.json is written by hand from the files above, not by CMake; flag order
#     follows CMake's Ninja CUDA rule (defines, includes, CMAKE_CUDA_FLAGS, config flags, -std,
#     -Xcompiler=-fPIC, target options, source gencodes); -MD/-MF dependency flags are left out
#     (narrowing.py strips them anyway). CMake may pass includes through an --options-file.
#   - No CUTLASS include dirs (CMakeLists.txt:1277, FetchContent'd): the chosen units do not include
#     CUTLASS (checked with nvcc -M below).
#   - One define set for both variants: the one a TORCH_CUDA_ARCH_LIST=12.0 configure produces.
#     A configure with the default list also adds -DENABLE_SCALED_MM_SM90/SM100/C2X,
#     -DENABLE_CUTLASS_MOE_SM90/SM100, -DENABLE_NVFP4_SM100, -DENABLE_CUTLASS_MLA (CMakeLists.txt:
#     841,909,939,965,989,1084-1085,1139); the script checks that no file the unit includes
#     mentions any ENABLE_*/VLLM_ENABLE_* macro, so the code compiled is the same.
#   - CUDA headers: nvcc 13.5.37 from NVIDIA's PyPI wheels ($CUDA), whose include/ has no CCCL
#     (cub/thrust/libcu++) and no cuBLAS headers; those come, as -isystem after nvcc's own -I, from
#     the vLLM venv's nvidia wheels (nvidia-cuda-cccl 13.3.5.0.6 = CCCL 3.5.0, nvidia-cublas
#     13.1.1.3). A CUDA 13.5 toolkit would ship its own CCCL and cuBLAS in the same include dir.
#   - Host compiler: this machine's g++ 12.2 (vLLM 0.33.0 requires GCC >= 11.3, CMakeLists.txt:24-28).
#   - No ccache/sccache launcher; build dir is $WORK/build.
#   - narrowing.py writes its objects to the fixed /tmp/narrow/{sm120,default}.o (do not run two
#     of these at once); this script copies them to $WORK/<unit>.<variant>.o afterwards.
#   - Object size includes the host -g debug info of RelWithDebInfo (most of the file); the device
#     code is the (size-compressed, --compress-mode=size) .nv_fatbin section, printed separately.
#   - UNVERIFIED: the torch include order/-isystem vs -I exactly as CMake writes them, and that
#     CMake adds nothing else (e.g. a -Xcompiler=-fvisibility flag) for this target.
#
# usage: vllm-narrowing.sh [UNIT ...]     (default: csrc/layernorm_kernels.cu)
#   env: WORK (scratch dir), KILN, CUDA (…/nvidia/cu13 of the nvcc wheel), VENV (venv with vLLM
#        0.33.0's torch 2.14 and nvidia wheels), NICE (nice level for the run, default 0),
#        DOCKER_VARIANT=1 (add the release-image list as a third variant), DRY=1 (stop after
#        writing compile_commands.json and checking the units preprocess).
set -euo pipefail

WORK=${WORK:-/work/scratch/h7/vllm-narrowing}
KILN=${KILN:-/work/main/target/debug/kiln}
CUDA=${CUDA:-/work/main/target/tmp/cuda13/nvidia/cu13}
VENV=${VENV:-/work/scratch/vllm-env}
NICE=${NICE:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
SDIST_SHA256=f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112
UNITS=("$@")
[ ${#UNITS[@]} -gt 0 ] || UNITS=(csrc/layernorm_kernels.cu)
mkdir -p "$WORK"
cd "$WORK"

# 1. The sdist, by the sha256 PyPI's JSON gives for it (pinned here too).
if ! echo "$SDIST_SHA256  vllm-0.33.0.tar.gz" | sha256sum -c --status 2>/dev/null; then
  python3 - "$SDIST_SHA256" <<'EOF'
import hashlib, json, sys, urllib.error, urllib.parse, urllib.request
want = sys.argv[1]
def files():
    try:  # the per-version endpoint; some mirrors only serve the project one
        url = "https://pypi.org/pypi/vllm/0.33.0/json"
        return url, json.load(urllib.request.urlopen(url, timeout=120))["urls"]
    except urllib.error.HTTPError:
        url = "https://pypi.org/pypi/vllm/json"
        return url, json.load(urllib.request.urlopen(url, timeout=120))["releases"]["0.33.0"]
base, fs = files()
sd = [f for f in fs if f["packagetype"] == "sdist"]
assert len(sd) == 1, sd
sd = sd[0]
assert sd["digests"]["sha256"] == want, (sd["digests"]["sha256"], want)
url = urllib.parse.urljoin(base, sd["url"])
print("downloading", url, file=sys.stderr)
h = hashlib.sha256()
with urllib.request.urlopen(url, timeout=600) as r, open("vllm-0.33.0.tar.gz.part", "wb") as out:
    while chunk := r.read(1 << 20):
        h.update(chunk)
        out.write(chunk)
assert h.hexdigest() == want, h.hexdigest()
import os; os.replace("vllm-0.33.0.tar.gz.part", "vllm-0.33.0.tar.gz")
EOF
fi
[ -d vllm-0.33.0 ] || tar xzf vllm-0.33.0.tar.gz
SRC=$WORK/vllm-0.33.0
# The facts this script relies on, re-read from the sdist (fails loudly if they moved).
grep -q 'set(CUDA_SUPPORTED_ARCHS "7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.7;11.0;12.0")' "$SRC/CMakeLists.txt"
sed -n 123p "$SRC/CMakeLists.txt" | grep -q '10.7;11.0;12.0'
sed -n 269p "$SRC/CMakeLists.txt" | grep -q -- '--compress-mode=size'
sed -n 140p "$SRC/cmake/utils.cmake" | grep -q -- '-DENABLE_FP8'

# 2. Headers the nvcc wheel lacks (CCCL, cuBLAS), from the venv's nvidia wheels.
SITE=$VENV/lib/python3.12/site-packages
NV=$SITE/nvidia/cu13/include
mkdir -p cuda-extra
for h in "$NV"/cublas*.h; do ln -sf "$h" cuda-extra/; done
PYINC=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
COMMON_NVCC=$("$VENV/bin/python" -c 'from torch.utils.cpp_extension import COMMON_NVCC_FLAGS as f; print(";".join(f))')

# 3. compile_commands.json, as vLLM's CMake would write it (TORCH_CUDA_ARCH_LIST=12.0 configure).
mkdir -p build
python3 - "$WORK" "$SRC" "$CUDA" "$SITE" "$NV" "$PYINC" "$COMMON_NVCC" "${UNITS[@]}" <<'EOF'
import json, sys
work, src, cuda, site, nv, pyinc, common, *units = sys.argv[1:]
torch = f"{site}/torch"
gpu_flags = common.split(";") + ["-DENABLE_FP8"]                      # utils.cmake:136-140
for d in ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
          "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"):
    gpu_flags = [f for f in gpu_flags if f != d]                       # utils.cmake:143-147
gpu_flags += ["--threads=1", "--compress-mode=size",                   # CMakeLists.txt:260,269
              "-DVLLM_ENABLE_COOPERATIVE_TOPK=1"]                      # CMakeLists.txt:497
defines = ["-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1", "-DPy_LIMITED_API=3",
           "-DTORCH_EXTENSION_NAME=_C_stable_libtorch", "-DTORCH_TARGET_VERSION=0x020B000000000000ULL",
           "-DUSE_C10D_GLOO", "-DUSE_C10D_NCCL", "-DUSE_CUDA", "-DUSE_DISTRIBUTED", "-DUSE_NVSHMEM",
           "-DUSE_RPC", "-DUSE_TENSORPIPE", "-DVLLM_ENABLE_COOPERATIVE_TOPK=1",
           "-DVLLM_ENABLE_FUSED_GDN_DECODE=1", "-DVLLM_ENABLE_FUSED_KDA_DECODE=1"]
includes = [f"-I{src}/csrc",
            "-isystem", f"{torch}/include", "-isystem", f"{torch}/include/torch/csrc/api/include",
            "-isystem", pyinc,
            # deviation: CCCL + cuBLAS headers from the venv's wheels (see header)
            "-isystem", f"{nv}/cccl", "-isystem", f"{work}/cuda-extra"]
cmake_cuda_flags = ["-DONNX_NAMESPACE=onnx_c2", "-Xcudafe",
                    ",".join("--diag_suppress=" + d for d in (             # cuda.cmake:331-341
                        "cc_clobber_ignored", "field_without_dll_interface",
                        "base_class_has_different_dll_interface", "dll_interface_conflict_none_assumed",
                        "dll_interface_conflict_dllexport_assumed", "bad_friend_decl")),
                    "--expt-relaxed-constexpr", "--expt-extended-lambda"]
db = []
for u in units:
    obj = f"CMakeFiles/_C_stable_libtorch.dir/{u}.o"
    db.append({"directory": f"{work}/build", "file": f"{src}/{u}", "output": obj,
               "arguments": [f"{cuda}/bin/nvcc", "-forward-unknown-to-host-compiler", *defines,
                             *includes, *cmake_cuda_flags, "-O2", "-g", "-DNDEBUG", "-std=c++20",
                             "-Xcompiler=-fPIC", *gpu_flags,
                             "-gencode", "arch=compute_120,code=sm_120",   # CMakeLists.txt:622-624
                             "-x", "cu", "-c", f"{src}/{u}", "-o", obj]})
json.dump(db, open(f"{work}/compile_commands.json", "w"), indent=1)
EOF
echo "wrote $WORK/compile_commands.json"

# 4. Check each unit: it preprocesses with these headers, includes no CUTLASS, and nothing it
#    includes tests an arch-dependent ENABLE_* define (so one define set serves both variants).
for u in "${UNITS[@]}"; do
  python3 - "$WORK/compile_commands.json" "$u" "$WORK/build" <<'EOF'
import json, re, subprocess, sys
db, unit, cwd = sys.argv[1:]
e = next(e for e in json.load(open(db)) if e["file"].endswith(unit))
a = e["arguments"]
i = a.index("-o")
argv = a[:i] + a[i + 2:]
argv = [x for x in argv if x != "-c"] + ["-M"]
out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
if out.returncode:
    sys.exit(out.stderr[-3000:])
deps = sorted({d for d in out.stdout.replace("\\\n", " ").split()[1:] if d.startswith("/")})
cutlass = [d for d in deps if "cutlass" in d.lower()]
macro = re.compile(r"\b(ENABLE_(SCALED_MM|CUTLASS|NVFP4)\w*|VLLM_ENABLE_\w+)")
hits = [d for d in deps if macro.search(open(d, errors="replace").read())]
print(f"{unit}: {len(deps)} included files; cutlass: {len(cutlass)}; files naming ENABLE_*: {hits}")
if cutlass or hits:
    sys.exit(1)
EOF
done
[ -z "${DRY:-}" ] || exit 0

# 5. The run: both variants side by side.
SM120="arch=compute_120,code=sm_120"
DEFAULT="arch=compute_75,code=sm_75;arch=compute_80,code=sm_80;arch=compute_86,code=sm_86;arch=compute_87,code=sm_87;arch=compute_89,code=sm_89;arch=compute_90,code=sm_90;arch=compute_100,code=sm_100;arch=compute_107,code=sm_107;arch=compute_110,code=sm_110;arch=compute_120,code=sm_120"
DOCKER="arch=compute_75,code=sm_75;arch=compute_80,code=sm_80;arch=compute_86,code=sm_86;arch=compute_89,code=sm_89;arch=compute_90,code=sm_90;arch=compute_100,code=sm_100;arch=compute_110,code=sm_110;arch=compute_120,code=sm_120"
VARIANTS=("sm120=$SM120" "default=$DEFAULT")
[ -z "${DOCKER_VARIANT:-}" ] || VARIANTS+=("docker=$DOCKER")
"$CUDA/bin/nvcc" --version | tail -2
g++ --version | head -1
for u in "${UNITS[@]}"; do
  echo "== $u   uptime before: $(uptime)"
  rc=0
  nice -n "$NICE" python3 "$HERE/h200/narrowing.py" "$KILN" --compdb "$WORK/compile_commands.json" "$u" \
    "${VARIANTS[@]}" || rc=$?
  echo "== $u   uptime after:  $(uptime)"
  for v in "${VARIANTS[@]}"; do
    n=${v%%=*}
    [ -f "/tmp/narrow/$n.o" ] || continue
    echo "-- kiln arch /tmp/narrow/$n.o"
    "$KILN" arch "/tmp/narrow/$n.o" || true
    cp "/tmp/narrow/$n.o" "$WORK/$(basename "$u" .cu).$n.o"
    # object size is mostly host -g debug info (RelWithDebInfo); the device code is .nv_fatbin
    readelf -SW "/tmp/narrow/$n.o" | python3 -c '
import re, sys
s = {}
for l in sys.stdin:
    m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", l)
    if m:
        s[m.group(1)] = s.get(m.group(1), 0) + int(m.group(2), 16)
dbg = sum(v for k, v in s.items() if ".debug" in k)
fat, text = s.get(".nv_fatbin", 0), s.get(".text", 0)
print(f"   sections: .nv_fatbin {fat} B, .debug*+.rela.debug* {dbg} B, .text {text} B")'
  done
  [ "$rc" = 0 ] || exit "$rc"
done
