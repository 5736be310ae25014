"""diverging.py with its norm weight passed as `self.weight.data`, as vLLM's RMSNorm passes
it: torch.export refuses the step (it cannot lift that tensor), Dynamo traces it. `--bisect`
must still name the planted subtraction, on the graph Dynamo traced (issue 50)."""

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

    def forward(self, x):
        h = torch.ops.aclcap.rms_norm(self.proj(x), self.weight.data, 1e-6)  # as vLLM does
        shifted = h + 1024.0
        h = shifted - 1024.0  # the planted divergence
        return self.out(h)


def build_model(device, dtype):
    torch.manual_seed(0)
    return Diverging().to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 64, device=device, dtype=dtype),)
