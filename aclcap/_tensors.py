"""Tensor helpers shared by check-meta's worker, the trace and the replay comparison."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_map_only


def clone_tensors(value: Any) -> Any:
    """A copy of every tensor in a (nested) value: kernels and steps may write their inputs."""
    return tree_map_only(torch.Tensor, torch.clone, value)


def describe(t: torch.Tensor) -> str:
    """Shape, dtype and strides of a tensor, as reasons print them."""
    return f"shape {list(t.shape)} dtype {t.dtype} strides {list(t.stride())}"
