"""A step whose custom op has a fake that is right for up to 4 tokens and wrong beyond
(aclcap_real::double_rows): the whole-step cross-check must name both sizes."""

import torch
from torch import nn

OP_LIBRARIES = ["../fixtures/reallib.py"]
SHAPES = [2, 5]


class Doubling(nn.Module):
    def forward(self, x):
        return torch.ops.aclcap_real.double_rows(x) + 1


def build_model(device, dtype):
    return Doubling()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
