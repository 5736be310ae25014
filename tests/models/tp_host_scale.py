"""A tensor-parallel step with a host value: each rank scales its partial sum by a Python
float drawn per step, then the ranks all-reduce. A graph freezes the float on every rank."""

import random

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


class ScaledSum(torch.nn.Module):
    def __init__(self, rank: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((8, 8), 0.1 * (rank + 1)))

    def forward(self, x, scale):
        partial = torch.ops.aten.mul.Scalar(x @ self.weight, scale)
        return funcol.all_reduce(partial, "sum", dist.group.WORLD)


def build_model(device, dtype):
    return ScaledSum(dist.get_rank()).to(device=device, dtype=dtype)


def make_inputs(size, device, dtype):
    return torch.randn(size, 8, device=device, dtype=dtype), random.uniform(0.5, 2.0)
