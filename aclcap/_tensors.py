"""Tensor helpers shared by check-meta's worker, the trace and the replay comparison."""

from __future__ import annotations

from typing import Any

import torch

from aclcap._compat import async_collective_tensor_type, tree_map_only


def clone_tensors(value: Any) -> Any:
    """A copy of every tensor in a (nested) value: kernels and steps may write their inputs."""
    return tree_map_only(torch.Tensor, torch.clone, value)


def wait_collectives(value: Any) -> Any:
    """Outputs of functional collectives left in flight (AsyncCollectiveTensor) waited
    for: an eager step is complete when it returns, as a replayed graph is, and a
    collective still pending under the next step's collectives can hang both."""
    return tree_map_only(async_collective_tensor_type(), lambda t: t.wait(), value)


def describe(t: torch.Tensor) -> str:
    """Shape, dtype and strides of a tensor, as reasons print them."""
    return f"shape {list(t.shape)} dtype {t.dtype} strides {list(t.stride())}"
