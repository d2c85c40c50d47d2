"""Bench only: flash-attn kernel units built by kiln (see setup.py). torch first: the extension
links against torch's libraries."""

import torch  # noqa: F401

from ._C import units  # noqa: F401
