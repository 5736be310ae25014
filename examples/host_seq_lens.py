"""A decode step whose attention op takes the sequence lengths as a host list, the way
attention metadata often reaches an op. A full graph freezes the lengths at capture, so a
replay attends over the capture's lengths: `aclcap capture examples/host_seq_lens.py`
names the frozen argument and exits 1. Split at the attention op, which then runs eagerly
between the graph pieces, the lengths stay live: `--graph-mode piecewise` exits 0. The
same step with the lengths as a tensor passes both: examples/tensor_seq_lens.py."""

from __future__ import annotations

import torch
from decode_math import attend, build, draw

SHAPES = [1, 2, 4]
SPLITTING_OPS = ["aclcap_example::attention_host_lens"]


@torch.library.custom_op("aclcap_example::attention_host_lens", mutates_args=())
def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              seq_lens: list[int]) -> torch.Tensor:
    return attend(q, k_cache, v_cache, seq_lens)


@attention.register_fake
def _(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
      seq_lens: list[int]) -> torch.Tensor:
    return torch.empty_like(q)


def build_model(device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    return build(attention, device, dtype)


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple:
    return draw(size, device, dtype)
