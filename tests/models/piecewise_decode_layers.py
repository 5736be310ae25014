"""Piecewise fixture: a 2-layer decode step whose attention, the splitting op, writes each
sequence's new key and value into its row of the layer's KV cache and then attends over
the cached rows; the caches are step inputs, laid out per sequence ([seqs, layers, rows,
hidden]), so each layer's cache is a strided view of them."""

from __future__ import annotations

import math

import torch
from torch import nn

SPLITTING_OPS = ["pw_decode::attention"]
SHAPES = [1, 2, 4]
HIDDEN = 16
LAYERS = 2
ROWS = 4  # cached positions per sequence


@torch.library.custom_op("pw_decode::attention", mutates_args=("k_cache", "v_cache"))
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
              v_cache: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Write k, v [seqs, hidden] at each sequence's position of its cache [seqs, rows,
    hidden], then attend q over the rows up to that position."""
    seqs = torch.arange(q.shape[0], device=q.device)
    k_cache[seqs, positions] = k
    v_cache[seqs, positions] = v
    scores = torch.einsum("sh,srh->sr", q, k_cache) / math.sqrt(q.shape[-1])
    rows = torch.arange(k_cache.shape[1], device=q.device)
    scores = scores.masked_fill(rows[None, :] > positions[:, None], float("-inf"))
    return torch.einsum("sr,srh->sh", scores.softmax(-1), v_cache)


@attention.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
      v_cache: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(q)


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, h: torch.Tensor, positions: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(h)).chunk(3, dim=-1)
        return h + self.o(torch.ops.pw_decode.attention(q, k, v, k_cache, v_cache, positions))


class Step(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.head = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor) -> torch.Tensor:
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(h, positions, k_cache[:, i], v_cache[:, i])
        return self.head(h)


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    def cache() -> torch.Tensor:
        return torch.randn(size, LAYERS, ROWS, HIDDEN, device=device, dtype=dtype)

    return (torch.randn(size, HIDDEN, device=device, dtype=dtype),
            torch.randint(0, ROWS, (size,), device=device), cache(), cache())
