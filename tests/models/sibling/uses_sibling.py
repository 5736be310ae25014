"""A model file that imports a module from its own folder, as a script can."""

import torch
from helper_layers import Double


def build_model(device, dtype):
    return Double()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 4, device=device, dtype=dtype),)
