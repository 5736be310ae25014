"""A decode step whose attention op takes each request's context length as a host list
(`int[] seq_lens`), drawn with Python's `random` as a model runner's test harness draws
them, and a library with no meta for it (namespace `aclcap_hostlens`). Synthesis harvests
the op's calls from this step in every worker it starts: the verifying worker must make the
held-out calls again, on a warm result cache as on a cold one (issue 58 item 2)."""

import random

import torch

_LIB = torch.library.Library("aclcap_hostlens", "DEF")
_LIB.define("decode_attn_host(Tensor q, Tensor kv, int[] seq_lens) -> Tensor")


def _decode_attn_host(q, kv, seq_lens):
    """q [B, D], kv [B, T, D]: each request attends over its first seq_lens[b] rows."""
    torch._check(len(seq_lens) == q.shape[0], lambda: "one length per request")
    out = torch.empty_like(q)
    for b, n in enumerate(seq_lens):
        scores = torch.softmax(kv[b, :n] @ q[b] / q.shape[-1] ** 0.5, 0)
        out[b] = scores @ kv[b, :n]
    return out


_LIB.impl("decode_attn_host", _decode_attn_host, "CPU")
SHAPES = [2, 3]
CONTEXT = 16


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, kv, seq_lens):
        return torch.ops.aclcap_hostlens.decode_attn_host(self.proj(x), kv, seq_lens)


def build_model(device, dtype):
    return Step().to(device=device, dtype=dtype)


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),
            torch.randn(size, CONTEXT, 8, device=device, dtype=dtype),
            [random.randint(1, CONTEXT) for _ in range(size)])
