"""A step that pads its tokens to whole chunks, as chunked linear attention does (Qwen3-Next's
gated delta rule): its shapes hold `(s + (8 - s % 8) % 8) // 8`, which a dynamic program makes
Inductor's vector codegen simplify in every index. Capture gives it a static program per
size instead."""
import torch
import torch.nn.functional as F

CHUNK = 8
SHAPES = [1, 2, 5]


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        tokens = x.shape[0]
        pad = (CHUNK - tokens % CHUNK) % CHUNK
        chunks = F.pad(self.proj(x), (0, 0, 0, pad)).view(-1, CHUNK, 8)
        mixed = chunks.cumsum(1).reshape(-1, 8)
        return mixed[:tokens] * 2


def build_model(device, dtype):
    torch.manual_seed(0)
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
