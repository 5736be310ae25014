"""Tensor helpers shared by check-meta's worker, the trace and the replay comparison."""

from __future__ import annotations

from typing import Any

import torch

from aclcap._compat import async_collective_tensor_type, tree_map_only


def clone_tensors(value: Any) -> Any:
    """A copy of every tensor in a (nested) value: kernels and steps may write their inputs."""
    return tree_map_only(torch.Tensor, torch.clone, value)


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as one flat uint8 tensor, to compare or hash byte for byte. A
    one-element tensor counts as contiguous whatever its stride (a column of one row,
    fbgemm's `segment_sum_csr` on one id), and `view(torch.uint8)` refuses a stride other
    than 1: such a tensor is copied first."""
    flat = t.detach().reshape(-1)
    if flat.numel() and flat.stride(0) != 1:
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat.view(torch.uint8)


def wait_collectives(value: Any) -> Any:
    """Outputs of functional collectives left in flight (AsyncCollectiveTensor) waited
    for: an eager step is complete when it returns, as a replayed graph is, and a
    collective still pending under the next step's collectives can hang both."""
    return tree_map_only(async_collective_tensor_type(), lambda t: t.wait(), value)


def describe(t: torch.Tensor) -> str:
    """Shape, dtype and strides of a tensor, as reasons print them."""
    return f"shape {list(t.shape)} dtype {t.dtype} strides {list(t.stride())}"
