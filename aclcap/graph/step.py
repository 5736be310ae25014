"""One step context, built once per run and shared by capture and bench: the model file,
the module, the device, the dtype, the size dims and the tolerance, and the capture backend.
Loading, building and probing the size dims happen here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from aclcap.devices import resolve_device
from aclcap.errors import UsageError
from aclcap.loading.model_file import (
    ModelSpec,
    instantiate_model,
    load_model_file,
    make_step_inputs,
    size_dims,
)

if TYPE_CHECKING:
    from aclcap.graph.backends.base import Backend
    from aclcap.graph.options import StepOptions

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Per-dtype defaults; a model file's TOLERANCE overrides them. Compiled code fuses ops and
# keeps intermediates in float32, so 16-bit dtypes differ from eager by a few ulps.
DEFAULT_TOLERANCE = {
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.bfloat16: {"atol": 6e-2, "rtol": 6e-2},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
}


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UsageError(f"--dtype {name!r}: choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None) -> dict[str, float]:
    tol = dict(DEFAULT_TOLERANCE.get(dtype, DEFAULT_TOLERANCE[torch.float32]))
    tol.update(override or {})
    return tol


@dataclass
class StepContext:
    """Everything a run needs to make, run and capture one model step."""

    spec: ModelSpec
    model: torch.nn.Module
    device: str
    dtype: torch.dtype
    dtype_name: str
    dims: list[list[int]]  # per input, the dims that equal the size
    tolerance: dict[str, float]
    backend: Backend

    def inputs(self, size: int) -> tuple:
        """Fresh inputs of one step at `size`."""
        return make_step_inputs(self.spec, size, self.device, self.dtype)


def prepare_step(options: StepOptions) -> StepContext:
    """Parse and resolve the options, load the model file and build the module; bad input
    raises UsageError before any work starts."""
    from aclcap.graph.backends import backend_for

    if options.model is None:
        raise UsageError("no model file given: pass MODEL.py")
    torch_dtype = parse_dtype(options.dtype)
    resolved = resolve_device(options.device)
    backend = backend_for(resolved, options)
    torch._dynamo.reset()  # each run compiles afresh: no guards or caches of an earlier one
    spec = load_model_file(options.model)
    model = instantiate_model(spec, resolved, torch_dtype)
    return StepContext(spec, model, resolved, torch_dtype, options.dtype,
                       size_dims(spec, resolved, torch_dtype),
                       tolerance_for(torch_dtype, spec.tolerance), backend)
