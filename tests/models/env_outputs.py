"""A step whose output count follows an environment variable (as a config switch does):
the AOTI cache must not hand the second run the first run's artifact."""

import os

import torch
from torch import nn

SHAPES = [2, 4]


class EnvStep(nn.Module):
    def __init__(self, outputs: int) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.outputs = outputs

    def forward(self, x):
        h = self.proj(x)
        return tuple(h * (i + 1) for i in range(self.outputs))


def build_model(device, dtype):
    torch.manual_seed(0)
    outputs = int(os.environ.get("ACLCAP_TEST_OUTPUTS", "1"))
    return EnvStep(outputs).to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
