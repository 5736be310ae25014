"""A model that does not fit in one graph, so `aclcap capture` has something to report:
a data-dependent `.item()` branch (a graph break) and a custom op with no meta impl (which
torch.compile cannot trace, so it falls out of the graph too)."""

from __future__ import annotations

import torch
from torch import nn

import aclcap_ops

aclcap_ops.load()  # builds if stale, then registers torch.ops.aclcap
SHAPES = [1, 2, 4]

# A custom op with a real kernel but no fake/meta impl: the defect check-meta reports.
_lib = torch.library.Library("aclcap_example", "FRAGMENT")
_lib.define("scale_rows(Tensor x) -> Tensor")
_lib.impl("scale_rows", lambda x: x * 0.5, "CPU")
OP_LIBRARIES: list[str] = []


class GraphBreakModel(nn.Module):
    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.ops.aclcap.rms_norm(self.proj(x), self.weight, 1e-6)
        if h.sum().item() > 0:  # data-dependent branch: torch.compile breaks the graph here
            h = h * 2
        h = torch.ops.aclcap_example.scale_rows(h)
        return torch.ops.aclcap.silu_and_mul(torch.cat((h, h), dim=-1))


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return GraphBreakModel().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, 64, device=device, dtype=dtype),)
