"""The decode step both host-value examples share (host_seq_lens.py passes the sequence
lengths as a host list, tensor_seq_lens.py as a tensor): one token per sequence attends to
the first `seq_lens[i]` entries of its KV cache row."""

from __future__ import annotations

import torch
from torch import nn

HIDDEN, HEADS, HEAD_DIM, CONTEXT = 32, 2, 16, 24


def attend(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
           seq_lens: list[int]) -> torch.Tensor:
    """q [tokens, heads, dim], caches [tokens, context, heads, dim] -> [tokens, heads, dim]."""
    out = torch.empty_like(q)
    for i, n in enumerate(seq_lens):
        scores = torch.einsum("hd,nhd->hn", q[i], k_cache[i, :n]) * HEAD_DIM ** -0.5
        out[i] = torch.einsum("hn,nhd->hd", scores.softmax(-1), v_cache[i, :n])
    return out


class DecodeStep(nn.Module):
    """Project, attend through `attention` (the example's custom op), project back."""

    def __init__(self, attention: object) -> None:
        super().__init__()
        self.attention = attention
        self.q = nn.Linear(HIDDEN, HEADS * HEAD_DIM)
        self.o = nn.Linear(HEADS * HEAD_DIM, HIDDEN)

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                seq_lens: object) -> torch.Tensor:
        q = self.q(x).view(-1, HEADS, HEAD_DIM)
        a = self.attention(q, k_cache, v_cache, seq_lens)
        return self.o(a.reshape(-1, HEADS * HEAD_DIM))


def build(attention: object, device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return DecodeStep(attention).to(device=device, dtype=dtype).eval()


def draw(size: int, device: torch.device, dtype: torch.dtype
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """Fresh values each call (unseeded): the lengths differ from draw to draw, as a
    serving engine's do from step to step."""
    caches = [torch.randn(size, CONTEXT, HEADS, HEAD_DIM, device=device, dtype=dtype)
              for _ in range(2)]
    seq_lens = torch.randint(1, CONTEXT + 1, (size,)).tolist()
    return torch.randn(size, HIDDEN, device=device, dtype=dtype), *caches, seq_lens
