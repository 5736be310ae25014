"""vLLM's RMSNorm pattern without vLLM: the step passes `self.weight.data` to an op, which
torch.export cannot lift ("fake tensor in the exported program constant's list") while
Dynamo and Inductor compile it. A per-step forward context lives in another module's
global (`context_holder.CONTEXT`, as vLLM keeps `vllm.forward_context._forward_context`),
and pad_inputs pads it as vLLM pads attention metadata."""

import random

import context_holder  # beside this file: a model file's folder is on sys.path
import torch

SHAPES = [2, 4]
PADDED: list[tuple[int, int]] = []  # (size, padded): what pad_inputs was asked


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x):
        return torch.ops.aten.mul(x, self.weight.data)


@torch.library.custom_op("weight_data::scaled", mutates_args=())
def scaled(x: torch.Tensor) -> torch.Tensor:
    """Reads the step's context outside its arguments, as vLLM's attention ops read the
    forward context: its `scale` is as long as the draw, so another draw's context fails."""
    return x * context_holder.CONTEXT["scale"][:, None]


@scaled.register_fake
def _(x):
    return torch.empty_like(x)


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()

    def forward(self, x):
        return scaled(self.norm(x))


def build_model(device, dtype):
    return Step().to(device, dtype)


def _set_context(size, padded, dtype):
    scale = torch.full((padded,), -1.0, dtype=dtype)  # padded rows: -1, as a pad slot
    scale[:size] = torch.rand(size, dtype=dtype) + random.random()
    context_holder.CONTEXT = {"scale": scale}


def make_inputs(size, device, dtype):
    _set_context(size, size, dtype)
    return (torch.randn(size, 8, device=device, dtype=dtype),)


def pad_inputs(inputs, size, padded):
    PADDED.append((size, padded))
    (x,) = inputs
    real = context_holder.CONTEXT["scale"][:size].clone()
    _set_context(size, padded, x.dtype)
    context_holder.CONTEXT["scale"][:size] = real
    return (torch.cat((x, x[-1:].expand(padded - size, -1))),)
