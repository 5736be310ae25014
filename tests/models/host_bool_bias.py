"""A step whose only host value is a per-step bool that decides whether an op adds a bias
(it changes the result): frozen at capture, so a replay whose draw flips it goes stale. A
second draw equals the first half the time: only a draw chosen to differ proves it."""

import random

import torch


@torch.library.custom_op("host_bool::linear", mutates_args=())
def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, add_bias: bool) -> torch.Tensor:
    out = x @ w
    return out + b if add_bias else out


@linear.register_fake
def _(x, w, b, add_bias):
    return x.new_empty(x.shape[0], w.shape[1])


class Step(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8))
        self.b = torch.nn.Parameter(torch.randn(8))

    def forward(self, x, add_bias):
        return linear(x, self.w, self.b, add_bias)


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    return torch.randn(size, 8, device=device, dtype=dtype), random.random() < 0.5
