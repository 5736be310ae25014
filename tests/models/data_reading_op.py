"""A model step that calls a C++ composite which reads raw data (aclcap_real::slot_mapping):
torch.compile cannot trace it, and capture must say so by op and line, exit 1."""

import torch
from torch import nn

OP_LIBRARIES = ["../fixtures/reallib.py"]
SHAPES = [2, 4]


class SlotStep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x, positions):
        slots = torch.ops.aclcap_real.slot_mapping(positions, 4)
        return self.proj(x) + slots.unsqueeze(-1).to(x.dtype)


def build_model(device, dtype):
    torch.manual_seed(0)
    return SlotStep().to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return torch.randn(size, 16, device=device, dtype=dtype), torch.arange(size, device=device)
