"""kiln device fixture: y <- a * x + y on the GPU."""

import torch  # noqa: F401  (the extension links against libtorch)

from kiln_torchext._axpy import axpy

__all__ = ["axpy"]
