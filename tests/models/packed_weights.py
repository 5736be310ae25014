"""A model that runs a custom op while it builds (weights prepared at load time, as
quantization libraries pack theirs) and another in its step: `--samples-from` records both,
the build-time call labelled by its line in build_model."""

import torch
from torch import nn

OP_LIBRARIES = ["../fixtures/reallib.py"]
SHAPES = [2, 3]


class Packed(nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)

    def forward(self, x):
        return torch.ops.aclcap_real.row_sum(x * self.weight)


def build_model(device, dtype):
    torch.manual_seed(0)
    raw = torch.randn(5, 16, device=device, dtype=dtype)
    packed = torch.ops.aclcap_real.scale_shift(raw, 0.5)  # the build-time call
    return Packed(packed[0]).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 16, device=device, dtype=dtype),)
