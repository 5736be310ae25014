"""A step whose mask helper (masks.py) reads the mask on the host: in the compiled step too."""

import torch
from masks import drop_mask_always_checked


class MaskedScores(torch.nn.Module):
    def forward(self, x, mask):
        mask = drop_mask_always_checked(mask)
        return x * 2 if mask is None else x.masked_fill(~mask, 0.0) * 2


def build_model(device, dtype):
    return MaskedScores()


def make_inputs(size, device, dtype):
    x = torch.randn(size, 8, device=device, dtype=dtype)
    return x, torch.rand(size, 8, device=device) > 0.1
