"""A test model with one planted node whose compiled result differs from eager in bfloat16:
eager rounds `shifted` to bfloat16 (spacing 8 at 1024) before subtracting, while a
compiler fuses the add and subtract in float32. `--bisect` must name the subtraction."""

import torch
from torch import nn

import aclcap_ops

aclcap_ops.load()

OP_LIBRARIES = ["aclcap_ops"]
SHAPES = [2, 4]


class Diverging(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)
        self.weight = nn.Parameter(torch.ones(64))
        self.out = nn.Linear(64, 64)

    def norm_weight(self) -> torch.Tensor:
        return self.weight

    def forward(self, x):
        h = torch.ops.aclcap.rms_norm(self.proj(x), self.norm_weight(), 1e-6)
        shifted = h + 1024.0
        h = shifted - 1024.0  # the planted divergence
        return self.out(h)


def build_model(device, dtype, cls=Diverging):
    torch.manual_seed(0)
    return cls().to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 64, device=device, dtype=dtype),)
