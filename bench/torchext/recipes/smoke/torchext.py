# kiln smoke test for the device fixture: the axpy kernel runs on this GPU and is right.
import torch
import kiln_torchext

x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
y = torch.ones_like(x)
kiln_torchext.axpy(2.0, x, y)
torch.cuda.synchronize()
assert torch.equal(y, 2 * x + 1), "axpy computed a wrong result"
