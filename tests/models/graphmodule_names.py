"""State named like torch.fx.GraphModule's own attributes, as real libraries name it: an
8-bit quantized linear whose dequantization map is a buffer called `code` (a well-known
quantization library's name), a top-level buffer `graph` (an adjacency, say) and a
parameter `meta`. torch.export unlifts state onto a GraphModule, where these names are
taken; capture must not depend on what a model calls its state."""

import torch
from torch import nn

SHAPES = [1, 2, 4]


class QuantLinear(nn.Module):
    """y = x @ (code[weight_q] * absmax)^T: 8-bit codes into a 256-entry value map."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.register_buffer("code", torch.linspace(-1.0, 1.0, 256))
        self.register_buffer("weight_q", torch.randint(0, 256, (n_out, n_in), dtype=torch.uint8))
        self.register_buffer("absmax", torch.rand(n_out) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.code[self.weight_q.long()] * self.absmax[:, None]
        return x @ weight.to(x.dtype).t()


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = QuantLinear(16, 16)
        self.register_buffer("graph", torch.rand(16, 16))
        self.meta = nn.Parameter(torch.randn(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x) @ self.graph.to(x.dtype) + self.meta


def build_model(device, dtype):
    torch.manual_seed(0)
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 16, device=device, dtype=dtype),)
