"""A model file whose make_inputs seeds its generator with the size, as model files often
do for reproducibility: every call returns the same values, so replaying "on fresh inputs"
replays the capture's own values. capture says so."""

import torch
from torch import nn

SHAPES = [2, 4]


def build_model(device, dtype):
    torch.manual_seed(0)
    return nn.Linear(8, 8).to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    generator = torch.Generator().manual_seed(size)
    return (torch.randn(size, 8, generator=generator).to(device=device, dtype=dtype),)
