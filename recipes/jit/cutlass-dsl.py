"""kiln's JIT proof for the CuTe DSL (nvidia-cutlass-dsl): compile a small real @cute.kernel for
each target arch with no GPU, keep the cubin, and name it (kiln reads it back).

The DSL reads its settings when `cutlass` is imported (cutlass/base_dsl/env_manager.py in 4.8.0:
`[DSL]_ARCH` at :828, default detected, else sm_100a (:412-436); `KEEP` at :802; the dump
directory), so each arch is compiled in its own interpreter. It brings its own compiler, so no
CUDA toolkit is needed. kiln runs this as `python -I -B` with KILN_JIT_DIR (a fresh directory)
and KILN_TARGET_ARCHS ("12.0 9.0"); SM 9.0 and up get the arch-specific target (`sm_120a`),
which the DSL's SM90+ kernels need.

Prints one JSON line per arch: {"kernel": ..., "files": [...], "seconds": ...}.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

work = Path(os.environ["KILN_JIT_DIR"]).resolve()


def compile_one(arch: str, out: Path) -> None:
    os.environ["CUTE_DSL_ARCH"] = arch
    os.environ["CUTE_DSL_KEEP"] = "cubin"
    # 4.4.x reads its own switch instead (cutlass/base_dsl/env_manager.py:363 in 4.4.2,
    # `[DSL]_KEEP_CUBIN`); without it a 4.4.2 compile keeps nothing (seen on the H200).
    os.environ["CUTE_DSL_KEEP_CUBIN"] = "1"
    os.environ["CUTE_DSL_DUMP_DIR"] = str(out)
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor

    threads, n = 128, 1024

    @cute.kernel
    def add_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * threads + tidx
        c[i] = a[i] + b[i]

    @cute.jit
    def add(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
        add_kernel(a, b, c).launch(grid=(n // threads, 1, 1), block=(threads, 1, 1))

    t = [make_fake_compact_tensor(cutlass.Float32, (n,)) for _ in range(3)]
    cute.compile(add, *t)


if len(sys.argv) == 3:
    compile_one(sys.argv[1], Path(sys.argv[2]))
    sys.exit(0)

for target in os.environ.get("KILN_TARGET_ARCHS", "").split():
    major, minor = target.split(".")
    sm = f"sm_{major}{minor}" + ("a" if int(major) >= 9 else "")
    out = work / sm
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-B", __file__, sm, str(out)], check=True)
    cubins = sorted(str(p) for p in out.rglob("*.cubin"))
    print(json.dumps({"kernel": f"cute elementwise add ({sm})", "files": cubins, "seconds": round(time.perf_counter() - start, 2)}), flush=True)
