"""Piecewise fixture: a graph piece whose input is twice the step's size long (`torch.cat` of
two token-long tensors) beside a token-long one: its dim is exported as 2 * tokens, derived
from the token dim, or export refuses the piece (the slices relate the two)."""

from __future__ import annotations

import torch
from torch import nn

SPLITTING_OPS = ["pw_derived::double"]
SHAPES = [2, 4]


@torch.library.custom_op("pw_derived::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@double.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        both = torch.cat([self.lin(x), x]).relu()  # 2 * tokens rows, into the next piece
        d = torch.ops.pw_derived.double(x)
        return both[: x.shape[0]] + both[x.shape[0]:] + d


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, 16, device=device, dtype=dtype),)
