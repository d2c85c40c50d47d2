"""flash-attn's flash_attn_func on the GPU against torch's scaled_dot_product_attention.

Shapes cover fp16 and bf16, head dims 64, 128 and 256, causal and not, and grouped-query
attention (fewer K/V heads than Q heads, which SDPA takes with enable_gqa=True). Prints one JSON
line per case and exits 1 if any case differs by more than the tolerance. Needs a GPU.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

t0 = time.perf_counter()
import flash_attn  # noqa: E402
from flash_attn import flash_attn_func  # noqa: E402

print(json.dumps({"flash_attn": flash_attn.__version__, "file": flash_attn.__file__,
                  "import_seconds": round(time.perf_counter() - t0, 3),
                  "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                  "capability": torch.cuda.get_device_capability()}), flush=True)

torch.manual_seed(0)
cases = [
    # batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, causal
    (2, 512, 512, 16, 16, 64, torch.float16, False),
    (2, 1024, 1024, 32, 8, 128, torch.bfloat16, True),
    (1, 333, 777, 8, 8, 128, torch.float16, False),
    (4, 256, 256, 16, 4, 256, torch.bfloat16, True),
    (1, 1, 4096, 32, 8, 128, torch.bfloat16, False),  # one decode step against a long cache
]
failed = 0
for b, sq, sk, hq, hkv, d, dtype, causal in cases:
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=dtype)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
    v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
    torch.cuda.synchronize()
    s = time.perf_counter()
    out = flash_attn_func(q, k, v, causal=causal)
    torch.cuda.synchronize()
    first = time.perf_counter() - s
    s = time.perf_counter()
    for _ in range(10):
        flash_attn_func(q, k, v, causal=causal)
    torch.cuda.synchronize()
    warm = (time.perf_counter() - s) / 10
    # flash-attn's causal mask is aligned to the bottom-right corner when seqlen_q != seqlen_k
    # (flash_attn_interface.py docstring); SDPA's is_causal is top-left, so build the mask.
    mask = None
    if causal:
        i = torch.arange(sq, device="cuda")[:, None]
        j = torch.arange(sk, device="cuda")[None, :]
        mask = j <= i + (sk - sq)
    ref = F.scaled_dot_product_attention(
        q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(),
        attn_mask=mask, enable_gqa=hq != hkv).transpose(1, 2)
    err = (out.float() - ref).abs().max().item()
    tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
    ok = err <= tol
    failed += not ok
    print(json.dumps({"case": f"b{b} sq{sq} sk{sk} hq{hq} hkv{hkv} d{d} {str(dtype)[6:]} causal={causal}",
                      "max_abs_err": round(err, 6), "tol": tol, "match": ok,
                      "first_call_s": round(first, 4), "warm_call_ms": round(warm * 1e3, 3)}), flush=True)
print(json.dumps({"cases": len(cases), "failed": failed}))
sys.exit(1 if failed else 0)
