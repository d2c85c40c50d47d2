# kiln smoke test for torch: its CUDA kernels run on this GPU and compute the right answer
# (a matrix product and an elementwise kernel, checked against the CPU).
import torch

assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
a = torch.randn(256, 256, device="cuda")
b = torch.randn(256, 256, device="cuda")
got = (a @ b + 1).cpu()
want = a.cpu() @ b.cpu() + 1
err = (got - want).abs().max().item()
assert err < 1e-2, f"GPU result differs from the CPU by {err}"
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: max error {err:.2e}")
