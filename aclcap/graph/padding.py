"""Padding a step up to a capture size and back: how a serving engine runs a batch size it
has no graph for on the next larger graph (capture --pad checks it, bench --pad times it)."""

from __future__ import annotations

from typing import Any

import torch

from aclcap.size_dims import extent_of


def padded_sizes(capture_sizes: list[int]) -> dict[int, int]:
    """Each size between the capture sizes -> the capture size it is padded up to."""
    ordered = sorted(capture_sizes)
    return {size: next(s for s in ordered if s > size)
            for size in range(ordered[0] + 1, ordered[-1]) if size not in ordered}


def pad_to(args: tuple, dims: list[list[int]], size: int, target: int) -> tuple:
    """Pad every size dim from `size` to `target` by repeating the last token: a padded
    token recomputes and rewrites exactly what the last real one does, so it leaves the KV
    cache as the unpadded step would (vLLM points padded tokens at a pad slot instead; this
    works for any model without knowing which input is the slot mapping). A host list
    whose length is the size (`seq_lens`) is padded the same way, with its last entry, as
    a runtime pads the host metadata of a padded batch: the padded tokens repeat the last
    request's work."""
    padded = []
    for t, ds in zip(args, dims, strict=True):
        if not isinstance(t, torch.Tensor):
            more = extent_of(ds[0], target) - extent_of(ds[0], size) if ds else 0
            padded.append(type(t)([*t, *[t[-1]] * more]) if ds else t)
            continue
        for d in ds:  # an offsets dim (size + 1) repeats its last offset: empty requests
            more = extent_of(d, target) - extent_of(d, size)
            tail = t.narrow(d, t.shape[d] - 1, 1).expand(*[more if i == d else -1
                                                           for i in range(t.dim())])
            t = torch.cat((t, tail), dim=d)
        padded.append(t.contiguous())
    return tuple(padded)


def unpad(args: tuple, dims: list[list[int]], size: int) -> tuple:
    """The inverse of pad_to: each size dim cut back to `size`."""
    cut = []
    for t, ds in zip(args, dims, strict=True):
        if not isinstance(t, torch.Tensor):
            cut.append(t[:extent_of(ds[0], size)] if ds else t)
            continue
        for d in ds:
            t = t.narrow(d, 0, extent_of(d, size))
        cut.append(t)
    return tuple(cut)


def cut_outputs(outputs: Any, size: int, target: int) -> Any:
    """Outputs of a padded step with their leading token dim cut back to `size`."""
    leaves = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    cut = tuple(o[:size] if isinstance(o, torch.Tensor) and o.dim() and o.shape[0] == target
                else o for o in leaves)
    return cut if isinstance(outputs, (tuple, list)) else cut[0]
