"""kiln's JIT proof for flash-attn-4: compile its real forward kernel for each target arch with no
GPU, the way upstream pre-compiles without one, keep the cubin, and name it (kiln reads it back).

flash-attn-4 compiles with the CuTe DSL at first call. Without a GPU it is told the kernel path by
FLASH_ATTENTION_ARCH and the compile target by CUTE_DSL_ARCH (flash_attn/cute/interface.py:101-117
in 4.0.0b36: "For CPU-only compilation (no GPU), set FLASH_ATTENTION_ARCH ... CUTE_DSL_ARCH ...
FLASH_ATTENTION_NUM_SMS"), and called under torch's FakeTensorMode, which "does not allocate actual
GPU tensors but retains tensor shape/dtype metadata for cute.compile"
(flash_attn/cute/testing.py:473-488; interface.py:741 and :1847 skip the launch in fake mode).
The DSL keeps the cubin with CUTE_DSL_KEEP=cubin in CUTE_DSL_DUMP_DIR (cutlass/base_dsl/
env_manager.py). Each arch compiles in its own interpreter, since both are read once.

The kernel: a causal bf16 forward, head dim 128, contiguous (not paged) KV, one split: on SM 12.x
the only forward there is (FlashAttentionForwardSm120, interface.py:1751-1755). kiln runs this as
`python -I -B` with KILN_JIT_DIR (a fresh directory) and KILN_TARGET_ARCHS ("12.0 9.0"); SM 9.0
and up get the arch-specific target (`sm_120a`). An arch FA4 has no forward for (below 8.0) is
skipped, so it has no kernel and the proof says so.

Prints one JSON line per arch: {"kernel": ..., "files": [...], "seconds": ...}.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

work = Path(os.environ["KILN_JIT_DIR"]).resolve()


def compile_one(sm: str, target: str, out: Path) -> None:
    os.environ["FLASH_ATTENTION_ARCH"] = sm
    os.environ["CUTE_DSL_ARCH"] = target
    # Only a forward that splits KV asks for the SM count (cute_dsl_utils.py:52-66); 12.x never
    # splits. A value keeps the other archs from asking a GPU that is not there.
    os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", "132")
    os.environ["CUTE_DSL_KEEP"] = "cubin"
    os.environ["CUTE_DSL_KEEP_CUBIN"] = "1"
    os.environ["CUTE_DSL_DUMP_DIR"] = str(out)
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from flash_attn.cute import flash_attn_func

    with FakeTensorMode():
        q, k, v = (torch.empty(1, 256, 8, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        flash_attn_func(q, k, v, causal=True)


if len(sys.argv) == 4:
    compile_one(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
    sys.exit(0)

for arch in os.environ.get("KILN_TARGET_ARCHS", "").split():
    major, minor = (int(x) for x in arch.split("."))
    if major < 8:
        continue
    sm = f"sm_{major}{minor}"
    target = sm + ("a" if major >= 9 else "")
    out = work / target
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-B", __file__, sm, target, str(out)], check=True)
    cubins = sorted(str(p) for p in out.rglob("*.cubin"))
    print(
        json.dumps(
            {
                "kernel": f"flash-attn-4 forward, causal bf16 hdim 128 ({target})",
                "files": cubins,
                "seconds": round(time.perf_counter() - start, 2),
            }
        ),
        flush=True,
    )
