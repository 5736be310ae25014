"""Piecewise fixture: a graph piece writes a step input in place (this step's key into its
row of the KV cache, `cache[:, 0].copy_(k)`) and the splitting op, an attention over the
cache rows, reads that input. Every piece must write through to the buffer the splitting op
reads, at every size, padded or not."""

from __future__ import annotations

import math

import torch
from torch import nn

SPLITTING_OPS = ["pw_kv::attend"]
SHAPES = [1, 2, 4]
HIDDEN = 16
ROWS = 4  # cached positions per sequence


@torch.library.custom_op("pw_kv::attend", mutates_args=())
def attend(q: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    """Each sequence's query [seqs, hidden] over its cached rows [seqs, rows, hidden]."""
    scores = torch.einsum("sh,srh->sr", q, cache) / math.sqrt(q.shape[-1])
    return torch.einsum("sr,srh->sh", scores.softmax(-1), cache)


@attend.register_fake
def _(q: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(q)


class Step(nn.Module):
    """One decode token per sequence: its key goes to row 0 of the sequence's cache."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(HIDDEN, HIDDEN)
        self.k = nn.Linear(HIDDEN, HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
        cache[:, 0].copy_(self.k(x))
        attn = torch.ops.pw_kv.attend(self.q(x), cache)
        return self.o(attn) + x


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    return Step().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return (torch.randn(size, HIDDEN, device=device, dtype=dtype),
            torch.randn(size, ROWS, HIDDEN, device=device, dtype=dtype))
