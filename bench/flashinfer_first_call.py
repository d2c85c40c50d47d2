#!/usr/bin/env python3
"""First-call latency of flashinfer kernels, cold JIT cache vs kiln's warm cache (`kiln install
flashinfer --aot`), each case in a fresh process.

Cases (a fresh FLASHINFER_WORKSPACE_BASE for every process unless said otherwise):
  cold     flashinfer's AOT directory hidden: the first call compiles the module (nvcc + ninja).
  warm     kiln's precompiled module in <flashinfer>/data/aot: loaded as it is, no compiler.
  jit-hit  the workspace of the cold run reused: ninja finds nothing to do (needs nvcc).
The first call of each kernel is timed from just before the call to after
torch.cuda.synchronize(); the second call is timed too, for reference. `import flashinfer` is
timed separately. silu and rmsnorm are checked against a torch reference.

Kernels: silu (flashinfer.activation.silu_and_mul), rmsnorm (flashinfer.norm.rmsnorm with
FLASHINFER_USE_CUDA_NORM=1, the CUDA JIT `norm` module kiln precompiles; 0.7.4 runs a CuTe DSL
kernel by default, flashinfer/norm/__init__.py:69 and :1284), rmsnorm-dsl (the default path,
not precompiled by kiln), decode (BatchDecodeWithPagedKVCacheWrapper, CUDA cores, bf16, head
dim 128: the batch_decode_bf16_hd128 module).

--no-gpu measures what can be measured without a GPU: per module, cold = build() (compile) +
load, warm = build_and_load() with FLASHINFER_DISABLE_JIT=1 (load only).

Needs only torch, flashinfer and (for cold / jit-hit) nvcc; no network. Prints a markdown table
and, with --json FILE, writes the rows.

  python bench/flashinfer_first_call.py --arch 9.0a                 # on the H200
  python bench/flashinfer_first_call.py --arch 12.0f --no-gpu       # here
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELS = ["silu", "rmsnorm", "rmsnorm-dsl", "decode"]
CASES = ["cold", "warm", "jit-hit"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", required=True, help='FLASHINFER_CUDA_ARCH_LIST, e.g. "9.0a" or "9.0a 12.0f"')
    p.add_argument("--kernels", default="silu,rmsnorm,decode", help=f"comma list of {KERNELS}")
    p.add_argument("--cases", default="cold,warm,jit-hit", help=f"comma list of {CASES}")
    p.add_argument("--repeat", type=int, default=1, help="fresh processes per case and kernel")
    p.add_argument("--python", default=sys.executable, help="the interpreter of the kiln-installed env")
    p.add_argument("--workdir", default=None, help="scratch (default: a temporary directory)")
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--no-gpu", action="store_true", help="compile/load only, no kernel call")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.kernels = [k.strip() for k in a.kernels.split(",") if k.strip()]
    a.cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [k for k in a.kernels if k not in KERNELS] + [c for c in a.cases if c not in CASES]
    if bad:
        p.error(f"unknown {bad}; kernels: {KERNELS}, cases: {CASES}")
    if " " not in a.arch and any(s in a.arch for s in ",;"):
        p.error("--arch is space-separated (flashinfer splits on one space, compilation_context.py:115)")
    return a


# ---------------------------------------------------------------------------------------- child


def spec_of(kernel):
    import torch
    from flashinfer.jit.activation import gen_act_and_mul_module
    from flashinfer.jit.attention.modules import gen_batch_decode_module
    from flashinfer.jit.norm import gen_norm_module

    if kernel == "silu":
        return gen_act_and_mul_module("silu")
    if kernel in ("rmsnorm", "rmsnorm-dsl"):
        return gen_norm_module()
    return gen_batch_decode_module(torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, 128, 128, 0, False, False)


def call(kernel):
    """One call of `kernel` on the GPU; returns (seconds, max abs error or None)."""
    import torch

    dev = "cuda"
    torch.manual_seed(0)
    if kernel == "silu":
        from flashinfer.activation import silu_and_mul

        x = torch.randn(16, 2 * 4096, dtype=torch.bfloat16, device=dev)
        torch.cuda.synchronize()
        t = time.perf_counter()
        y = silu_and_mul(x)
        torch.cuda.synchronize()
        s = time.perf_counter() - t
        d = x.shape[-1] // 2
        ref = torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float()
        return s, (y.float() - ref).abs().max().item()
    if kernel in ("rmsnorm", "rmsnorm-dsl"):
        from flashinfer.norm import rmsnorm

        x = torch.randn(16, 4096, dtype=torch.bfloat16, device=dev)
        w = torch.randn(4096, dtype=torch.bfloat16, device=dev)
        torch.cuda.synchronize()
        t = time.perf_counter()
        y = rmsnorm(x, w, 1e-6)
        torch.cuda.synchronize()
        s = time.perf_counter() - t
        xf = x.float()
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        return s, (y.float() - ref).abs().max().item()
    import flashinfer

    batch, pages_per_seq, page, heads, hd = 8, 4, 16, 32, 128
    ws = torch.empty(128 << 20, dtype=torch.uint8, device=dev)
    indptr = torch.arange(batch + 1, dtype=torch.int32, device=dev) * pages_per_seq
    indices = torch.arange(batch * pages_per_seq, dtype=torch.int32, device=dev)
    last = torch.full((batch,), page, dtype=torch.int32, device=dev)
    kv = torch.randn(batch * pages_per_seq, 2, page, heads, hd, dtype=torch.bfloat16, device=dev)
    q = torch.randn(batch, heads, hd, dtype=torch.bfloat16, device=dev)
    torch.cuda.synchronize()
    t = time.perf_counter()
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=False)
    w.plan(indptr, indices, last, heads, heads, hd, page, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    w.run(q, kv)
    torch.cuda.synchronize()
    return time.perf_counter() - t, None


def child(args):
    kernel, case = args.child.split(":")
    row = {"kernel": kernel, "case": case}
    t = time.perf_counter()
    import torch  # noqa: F401
    from flashinfer.jit import env as jit_env

    row["import_s"] = round(time.perf_counter() - t, 3)
    if case in ("cold", "jit-hit"):
        # Hide kiln's precompiled modules: flashinfer reads jit_env.FLASHINFER_AOT_DIR at each
        # lookup (flashinfer/jit/env.py:296-300; env.py:17-19 says to override it this way).
        jit_env.FLASHINFER_AOT_DIR = Path(os.environ["FLASHINFER_WORKSPACE_BASE"]) / "no-aot"
    spec = spec_of(kernel)
    row["module"] = spec.name
    row["aot"] = bool(spec.is_aot)
    t = time.perf_counter()
    if args.no_gpu:
        if case == "warm":
            os.environ["FLASHINFER_DISABLE_JIT"] = "1"
            spec.build_and_load()
        else:
            spec.build()
            spec.load()
        row["first_s"] = round(time.perf_counter() - t, 3)
    else:
        row["first_s"], row["max_err"] = call(kernel)
        row["second_s"], _ = call(kernel)
    print("ROW " + json.dumps(row), flush=True)


# --------------------------------------------------------------------------------------- parent


def link_stubs(work):
    """Without a driver there is no libcuda.so to link (-lcuda, jit/cpp_ext.py:273-279), and
    NVIDIA's PyPI toolkit has no unversioned libcudart.so: an empty stub and a link, for --no-gpu
    (as recipes/aot/flashinfer.py does)."""
    d = work / "link"
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "libcuda.so").exists():
        subprocess.run([os.environ.get("CC", "cc"), "-shared", "-o", str(d / "libcuda.so"), "-Wl,-soname,libcuda.so.1", "-x", "c", "/dev/null"], check=True)
    home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    if not (d / "libcudart.so").exists():
        for lib in ("lib64", "lib"):
            found = sorted((home / lib).glob("libcudart.so*"))
            if found:
                (d / "libcudart.so").symlink_to(found[0])
                break
    return d


def run_case(args, kernel, case, work, n):
    env = dict(os.environ)
    env["FLASHINFER_CUDA_ARCH_LIST"] = args.arch
    ws = work / f"{kernel}-cold-{n}" if case in ("cold", "jit-hit") else work / f"{kernel}-{case}-{n}"
    if case != "jit-hit":
        shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True, exist_ok=True)
    env["FLASHINFER_WORKSPACE_BASE"] = str(ws)
    if kernel == "rmsnorm":
        env["FLASHINFER_USE_CUDA_NORM"] = "1"
    if args.no_gpu:
        env["FLASHINFER_EXTRA_LDFLAGS"] = f"-L{link_stubs(work)}"
    # flashinfer runs a bare `ninja` (jit/cpp_ext.py:418): the env's bin first.
    env["PATH"] = os.pathsep.join([str(Path(args.python).parent), env.get("PATH", "")])
    cmd = [args.python, "-B", str(Path(__file__).resolve()), "--arch", args.arch, "--child", f"{kernel}:{case}"]
    if args.no_gpu:
        cmd.append("--no-gpu")
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    rows = [json.loads(line[4:]) for line in p.stdout.splitlines() if line.startswith("ROW ")]
    if p.returncode != 0 or not rows:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"kernel": kernel, "case": case, "error": tail[:300], "process_s": round(wall, 2)}
    rows[0]["process_s"] = round(wall, 2)
    return rows[0]


def table(rows):
    cols = ["kernel", "case", "module", "aot", "import_s", "first_s", "second_s", "max_err", "process_s", "error"]
    cols = [c for c in cols if any(c in r for r in rows)]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return "\n".join(out)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child(args)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="fi-first-call-"))
    work.mkdir(parents=True, exist_ok=True)
    # jit-hit reuses the cold run's workspace: order the cases so cold comes first.
    cases = [c for c in CASES if c in args.cases]
    if "jit-hit" in cases and "cold" not in cases:
        cases.insert(0, "cold")
    rows = []
    for n in range(args.repeat):
        for kernel in args.kernels:
            for case in cases:
                r = run_case(args, kernel, case, work, n)
                r["run"] = n
                rows.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    doc = {"arch": args.arch, "python": args.python, "no_gpu": args.no_gpu, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    print(table(rows))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
