"""The smallest step: one Linear 16 -> 16 on one token. Its time is almost all fixed cost
per call (Python dispatch in eager, the artifact's entry on cpu), so `aclcap bench
examples/one_linear.py --shapes 1` shows the cpu replay's fixed cost as its own figure."""

from __future__ import annotations

import torch
from torch import nn

SHAPES = [1]


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(16, 16).to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, 16, device=device, dtype=dtype),)
