"""A step that quantizes 7-wide rows to fbgemm's fused 8-bit rowwise form and back, on
fbgemm's own ops (their own metas): check-meta judges those metas against the CPU kernels."""

from __future__ import annotations

import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)
import torch

OP_LIBRARIES = ["fbgemm_gpu"]


class Step(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.ops.fbgemm.FloatToFused8BitRowwiseQuantized(x)
        return torch.ops.fbgemm.Fused8BitRowwiseQuantizedToFloat(q)


def build_model(device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    return Step()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple:
    return (torch.randn(size, 7, device=device),)
