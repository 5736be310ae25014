"""examples/host_seq_lens.py with the sequence lengths as a tensor, as vLLM keeps attention
metadata in persistent device tensors: a replay reads this step's lengths from the
tensor, so both `aclcap capture examples/tensor_seq_lens.py` and `--graph-mode piecewise`
exit 0."""

from __future__ import annotations

import torch
from decode_math import attend, build, draw

SHAPES = [1, 2, 4]
SPLITTING_OPS = ["aclcap_example::attention_tensor_lens"]


@torch.library.custom_op("aclcap_example::attention_tensor_lens", mutates_args=())
def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              seq_lens: torch.Tensor) -> torch.Tensor:
    return attend(q, k_cache, v_cache, seq_lens.tolist())  # the kernel reads it, at run time


@attention.register_fake
def _(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
      seq_lens: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(q)


def build_model(device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    return build(attention, device, dtype)


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple:
    x, k_cache, v_cache, seq_lens = draw(size, device, dtype)
    return x, k_cache, v_cache, torch.tensor(seq_lens, dtype=torch.int32, device=device)
