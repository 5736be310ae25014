"""Piecewise fixture (c): a splitting op with two outputs, both fresh allocations, both read
by the next graph piece (and one by the piece after the next split)."""

from __future__ import annotations

import torch
from torch import nn

SPLITTING_OPS = ["pw_multi::halves"]
SHAPES = [2, 4]


@torch.library.custom_op("pw_multi::halves", mutates_args=())
def halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = x.chunk(2, dim=-1)
    return a * 2, b.clone()


@halves.register_fake
def _(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    half = x.shape[-1] // 2
    return x.new_empty(x.shape[0], half), x.new_empty(x.shape[0], half)


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.mix = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = torch.ops.pw_multi.halves(self.up(x))
        h = self.mix(a * b)
        c, d = torch.ops.pw_multi.halves(h)
        return c + d, b.sum(-1)


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, 16, device=device, dtype=dtype),)
