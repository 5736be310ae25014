"""Fake against real: run an op's fake impl on fake copies of one call's arguments and compare
every output's shape, dtype, strides and storage offset with what the real kernel returned
(aliasing is opcheck's test_faketensor, which check-meta runs on every sample). check-meta runs
it per sample; capture's trace runs it on every custom-op call of a real step."""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten, tree_map_only

from aclcap._tensors import describe
from aclcap.errors import first_line


def compare_outputs(where: str, fake: Any, real: Any) -> list[str]:
    """One reason per output whose fake metadata differs from the real one's."""
    fake_leaves, _ = tree_flatten(fake)
    real_leaves, _ = tree_flatten(real)
    if len(fake_leaves) != len(real_leaves):
        return [f"{where} returns {len(fake_leaves)} outputs but the kernel {len(real_leaves)}"]
    reasons = []
    for i, (f, r) in enumerate(zip(fake_leaves, real_leaves, strict=True)):
        if not isinstance(r, torch.Tensor):
            continue
        if not isinstance(f, torch.Tensor):
            reasons.append(f"{where} output {i} is {type(f).__name__}, the kernel's is a Tensor")
        elif (tuple(f.shape), f.dtype) != (tuple(r.shape), r.dtype) or (
            r.numel() > 1 and tuple(f.stride()) != tuple(r.stride())
        ):
            reasons.append(f"{where} output {i}: {describe(f)}, but the kernel gives "
                           f"{describe(r)}")
        elif f.storage_offset() != r.storage_offset():
            reasons.append(f"{where} output {i}: storage offset {f.storage_offset()}, but the "
                           f"kernel's is {r.storage_offset()}")
    return reasons


def fake_mismatches(op: Any, args: tuple, kwargs: dict, real: Any) -> list[str]:
    """Reasons the op's fake disagrees with the real outputs `real` of the same call."""
    try:
        with FakeTensorMode() as mode:
            fake_args, fake_kwargs = tree_map_only(torch.Tensor, mode.from_tensor,
                                                   (args, kwargs))
            fake = op(*fake_args, **fake_kwargs)
    except Exception as exc:
        return [f"fake impl raised {first_line(exc)}"]
    return compare_outputs("fake impl", fake, real)
