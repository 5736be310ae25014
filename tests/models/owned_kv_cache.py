"""A model that owns its state: its KV cache is a pair of module buffers written in place
inside forward, as transformers' static cache does (`k_out.index_copy_(0, positions, k)`),
here a sliding-window cache with its own write position (a buffer too, advanced by every
step): a step's result depends on every step before it."""

from __future__ import annotations

import math

import torch
from torch import nn

SHAPES = [2, 4]
HIDDEN = 16
WINDOW = 32  # cached rows; the oldest is overwritten first


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)
        self.register_buffer("k_cache", torch.randn(WINDOW, HIDDEN))
        self.register_buffer("v_cache", torch.randn(WINDOW, HIDDEN))
        self.register_buffer("length", torch.zeros(1, dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        positions = (self.length + torch.arange(x.shape[0], device=x.device)) % WINDOW
        self.k_cache.index_copy_(0, positions, k)
        self.v_cache.index_copy_(0, positions, v)
        self.length.add_(x.shape[0])
        scores = q @ self.k_cache.T / math.sqrt(HIDDEN)
        return self.o(scores.softmax(-1) @ self.v_cache) + x


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.randn(size, HIDDEN, device=device, dtype=dtype),)
