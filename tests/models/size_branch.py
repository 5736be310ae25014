"""A step that branches on its token count, as MoE chunking or a backend switch does:
above 4 tokens it runs the projection in two chunks. torch.export cannot give one
artifact for all sizes; aclcap exports one per guard range."""

from __future__ import annotations

import torch
from torch import nn

SHAPES = [1, 2, 4, 8]


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:
            first, second = x.chunk(2)
            return torch.cat([self.proj(first), self.proj(second)]).relu()
        return self.proj(x).relu()


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return Step().to(device, dtype)


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, 16, device=device, dtype=dtype),)
