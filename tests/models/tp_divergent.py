"""A planted rank-divergent TP step, chosen by ACLCAP_TEST_DIVERGE:
- `extra`: rank 1 issues one more all-reduce than rank 0 (a rank-dependent branch);
- `shape`: rank 1 all-reduces a tensor of another shape;
- `c10d`: rank 1 calls the in-place dist.all_reduce once more (not a functional
  collective, so it runs for real and the ranks deadlock: only the deadline names it);
- `raise`: rank 1's build_model raises;
- `none`: the step never uses its process group."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn

SHAPES = [2]
MODE = os.environ.get("ACLCAP_TEST_DIVERGE", "extra")


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.rank = dist.get_rank() if dist.is_initialized() else 0

    def forward(self, x):
        h = self.proj(x)
        if MODE == "none":
            return h
        h = funcol.all_reduce(h, "sum", dist.group.WORLD)
        if self.rank == 1 and MODE == "extra":
            h = funcol.all_reduce(h, "sum", dist.group.WORLD)
        if MODE == "shape":
            part = h[:, : 4 if self.rank == 1 else 8]
            h = h + funcol.all_reduce(part, "sum", dist.group.WORLD).sum()
        if self.rank == 1 and MODE == "c10d":
            dist.all_reduce(h)
        return h * 1.0


def build_model(device, dtype):
    torch.manual_seed(0)
    if MODE == "raise" and dist.get_rank() == 1:
        raise RuntimeError("no weights for this rank")
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
