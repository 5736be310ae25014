"""A step that writes its `cache` input at slots given as a host list: a graph freezes the
slots, so a replay writes this step's values into the captured step's slots. What differs
from eager is the mutated input, which a report names by the step's parameter name."""

import random

import torch


@torch.library.custom_op("frozen_write::put", mutates_args=("cache",))
def put(cache: torch.Tensor, x: torch.Tensor, slots: list[int]) -> None:
    for i, slot in enumerate(slots):
        cache[slot] = x[i]


@put.register_fake
def _(cache, x, slots):
    return None


class Step(torch.nn.Module):
    def forward(self, x, cache, slots):
        put(cache, x * 2, slots)
        return x + 1


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),
            torch.zeros(16, 8, device=device, dtype=dtype), random.sample(range(16), size))
