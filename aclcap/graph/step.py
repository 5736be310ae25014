"""Prepare one step, once per run, for capture and bench: parse the options, pick the capture
backend, load the model file, build the module and probe the size dims. Loading, building and
probing happen here and nowhere else. This module sits above the backends (it picks one; they
take the StepContext of graph/backends/base.py), so the dependency runs one way."""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from aclcap._compat import dynamo_loaded, reset_dynamo
from aclcap.devices import resolve_device
from aclcap.errors import UsageError
from aclcap.graph.backends.base import Backend, StepContext
from aclcap.graph.compiles import resolve_compile_backend
from aclcap.loading.libraries import load_libraries
from aclcap.loading.model_file import instantiate_model, load_model_file, probe_inputs

if TYPE_CHECKING:
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


def backend_for(device: str, options: StepOptions) -> Backend:
    """The capture mechanism of a device: aclgraph on npu, cudagraph on cuda, aoti on cpu.
    `options.compile_backend` (a name or module:function) is what torch.compile uses: on a
    device, for the step that is captured; on cpu, for the compile that records recompiles.
    `options.max_autotune` tunes the cpu artifact; a device graph captures what the compile
    backend makes, so there it is a --compile-backend choice."""
    compile_backend = options.compile_backend
    if options.cpu_mechanism != "auto" and device != "cpu":
        raise UsageError(f"--cpu-mechanism chooses how a cpu step is compiled; on {device} "
                         "the step is captured as a device graph: leave it out")
    if options.max_autotune and device != "cpu":
        raise UsageError(f"--max-autotune tunes the cpu backend's AOTI artifact; on {device} "
                         "choose the compile backend with --compile-backend instead")

    chosen = resolve_compile_backend(compile_backend) if compile_backend else None
    if options.graph_mode == "piecewise":
        if device != "cpu":
            raise UsageError(f"--graph-mode piecewise is built for cpu only so far; on {device} "
                             "capture with --graph-mode full")
        from aclcap.graph.piecewise.backend import PiecewiseAotiBackend

        return PiecewiseAotiBackend(options)
    if device == "cpu" and options.cpu_mechanism == "inductor":
        from aclcap.graph.backends.inductor import InductorBackend

        return InductorBackend(options)
    if device == "cpu":
        from aclcap.graph.backends.aoti import AotiBackend

        return AotiBackend(options, compile_backend=chosen)
    from aclcap.graph.backends.device import DeviceGraphBackend

    return DeviceGraphBackend(device, compile_backend=chosen)


def prepare_step(options: StepOptions) -> StepContext:
    """Parse and resolve the options, load the model file and build the module; bad input
    raises UsageError before any work starts."""
    if options.model is None:
        raise UsageError("no model file given: pass MODEL.py")
    torch_dtype = parse_dtype(options.dtype)
    resolved = resolve_device(options.device)
    backend = backend_for(resolved, options)
    if dynamo_loaded():  # each run compiles afresh: no earlier guard or cache
        reset_dynamo()  # (not imported yet: nothing to reset, and a warm capture
        # that finds its trace cached never needs Dynamo: 0.5 s of imports saved)
    spec = load_model_file(options.model)
    if options.fakes:  # after the import, which defines the ops they register on
        load_libraries(list(options.fakes))
        spec.fakes = [str(Path(f).resolve()) for f in options.fakes]
    model = instantiate_model(spec, resolved, torch_dtype)
    dims, hosts = probe_inputs(spec, resolved, torch_dtype)
    return StepContext(spec, model, resolved, torch_dtype, options.dtype, dims,
                       tolerance_for(torch_dtype, spec.tolerance), backend, hosts)


def draw_reproducibly(step: StepContext) -> None:
    """Make the i-th call of step.inputs draw the same values in every run and on every
    rank: a verdict that a CI gates on is the same on every run (a random bool's second
    draw is not left to chance), and the ranks of one TP group see the same tokens and host
    values (sequence lengths), as a scheduler hands them out. torch's, Python's and (where
    the model file uses it) numpy's generators are seeded per call, so later calls still
    draw fresh values; left unseeded, `random` alone would give each rank its own lengths,
    its own splits and collectives."""
    counter = itertools.count()
    make = step.inputs

    def inputs(size: int) -> tuple:
        # The generators are put back after the call: what runs next (a later run's
        # build_model, in the same process) draws as it would have.
        seed, numpy = 10_000 + next(counter), sys.modules.get("numpy")
        saved = random.getstate(), numpy.random.get_state() if numpy is not None else None
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            random.seed(seed)
            if numpy is not None:
                numpy.random.seed(seed)
            try:
                return make(size)
            finally:
                random.setstate(saved[0])
                if numpy is not None:
                    numpy.random.set_state(saved[1])

    step.inputs = inputs  # type: ignore[method-assign]
