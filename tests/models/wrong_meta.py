"""A test model whose custom op has a deliberately wrong fake impl (it claims the op keeps
the last dim, the kernel halves it): capture must fail with a reason that names it."""

import torch
from torch import nn

_lib = torch.library.Library("aclcap_wrongmeta", "FRAGMENT")
_lib.define("first_half(Tensor x) -> Tensor")
_lib.impl("first_half", lambda x: x[..., : x.shape[-1] // 2].contiguous(), "CPU")


@torch.library.register_fake("aclcap_wrongmeta::first_half")
def _(x):
    return torch.empty_like(x)  # wrong on purpose


class WrongMeta(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x):
        h = torch.ops.aclcap_wrongmeta.first_half(self.proj(x))
        return torch.cat((h, h), dim=-1) * 2


def build_model(device, dtype):
    torch.manual_seed(0)
    return WrongMeta().to(device=device, dtype=dtype).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 64, device=device, dtype=dtype),)
