"""torch.export of one model step with every size dim dynamic (shared by the AOTI backend
and --bisect, so both see the same graph)."""

from __future__ import annotations

import contextlib
import io

import torch


def export_step(model: torch.nn.Module, args: tuple, dims: list[list[int]]
                ) -> torch.export.ExportedProgram:
    """Export with one Dim for all size dims. torch.export prints the partial graph to stderr
    when it fails; the caller reports the exception in one line, so that print is dropped."""
    tokens = torch.export.Dim("tokens", min=1)
    dynamic = tuple({d: tokens for d in ds} or None for ds in dims)
    with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
        return torch.export.export(model, tuple(t.clone() for t in args), dynamic_shapes=dynamic)
