"""Piecewise fixture (b): an op tagged cudagraph_unsafe reached through a composite op. The
traced graph holds only the composite, so the split leaves it inside a graph piece, where a
device graph would record the unsafe op."""

from __future__ import annotations

import torch
from torch import nn

SHAPES = [2, 4]

_lib = torch.library.Library("pw_hidden", "DEF")
_lib.define("unsafe(Tensor x) -> Tensor", tags=(torch.Tag.cudagraph_unsafe,))
_lib.impl("unsafe", lambda x: x + 1, "CompositeExplicitAutograd")
torch.library.register_fake("pw_hidden::unsafe", lambda x: torch.empty_like(x), lib=_lib)
_lib.define("outer(Tensor x) -> Tensor")
_lib.impl("outer", lambda x: torch.ops.pw_hidden.unsafe(x) * 2, "CompositeImplicitAutograd")


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        return torch.ops.pw_hidden.outer(h).relu()


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, 16, device=device, dtype=dtype),)
