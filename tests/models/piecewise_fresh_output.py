"""Piecewise fixture (a): a splitting op that returns a fresh allocation each step, which
the next graph piece reads. A piece replayed over the buffer it was captured with reads the
capture's stale values unless that input is refreshed on every replay."""

from __future__ import annotations

import torch
from torch import nn

SPLITTING_OPS = ["pw_fresh::double"]
SHAPES = [2, 4]


@torch.library.custom_op("pw_fresh::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2  # a new tensor every call: its address changes step to step


@double.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 16)
        self.down = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x).relu()
        d = torch.ops.pw_fresh.double(h)
        return self.down(d) + 1


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, 16, device=device, dtype=dtype),)
