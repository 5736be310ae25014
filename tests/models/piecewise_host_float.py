"""Piecewise fixture: a float host value (`temperature`) consumed by a custom op inside a
graph piece, beside a splitting op. Dynamo hands a float input to the piece as a 0-d
float64 tensor read with `.item()`, a SymFloat that export cannot pass an op taking
`float`: the piece must capture it as a frozen constant, reported like an int."""

import random

import torch

SPLITTING_OPS = ["pwf::attend"]
SHAPES = [2, 4]


@torch.library.custom_op("pwf::attend", mutates_args=())
def attend(x: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    return x * seq_lens[:, None].to(x.dtype)


@attend.register_fake
def _(x, seq_lens):
    return torch.empty_like(x)


@torch.library.custom_op("pwf::scale", mutates_args=())
def scale(x: torch.Tensor, temperature: float) -> torch.Tensor:
    return x / temperature


@scale.register_fake
def _(x, temperature):
    return torch.empty_like(x)


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, seq_lens, temperature):
        h = attend(self.lin(x), seq_lens)
        return scale(self.lin(h), temperature)


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),
            torch.randint(1, 9, (size,), device=device), random.uniform(0.5, 2.0))
