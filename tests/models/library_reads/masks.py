"""A library the model files beside it call, in the shape of transformers' mask helpers:
one function reads its mask on the host only when not compiling (torch.compile never makes
that read), the other reads it always (the compiled step breaks there)."""

import torch


def drop_mask_when_all_ones(mask: torch.Tensor) -> torch.Tensor | None:
    if not torch.compiler.is_compiling() and bool(mask.all()):
        return None
    return mask


def drop_mask_always_checked(mask: torch.Tensor) -> torch.Tensor | None:
    if mask.all():
        return None
    return mask
