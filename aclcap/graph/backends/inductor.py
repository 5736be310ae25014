"""cpu, where torch.export cannot take a step that Dynamo traces whole (vLLM's RMSNorm passes
`self.weight.data`; vLLM's attention ops take its opaque `LayerName`): the Dynamo graph is
compiled by Inductor, as vLLM's own graph mode compiles it, and never exported.

One compile serves every size (the size dims dynamic; size 1 recompiles, as Dynamo
specializes it). The compiled code reads the model's weights and buffers where they live
at each call, so nothing a process made at load time (vLLM's oneDNN handles, raw pointers
in int64 tensors) is baked into what a later process reuses; Inductor's own on-disk cache,
kept under aclcap's cache folder, makes a warm run a cache load. The replay is the compiled
step's call: Inductor's generated Python wrapper runs the step's kernels, with Dynamo's
guards checked once per step. Its C++ wrapper (`cpp_wrapper`) would take Python out of the
replay, but refuses an opaque argument ("arg type PyObject is not yet supported by
custom_op_wrapper", measured on vLLM's LayerName), which is what this mechanism is for."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch

from aclcap._compat import inductor_compiler
from aclcap.build import cache_root
from aclcap.draw_state import restore
from aclcap.errors import CaptureError, first_line
from aclcap.graph.backends.base import BackendSummary, Captured, StepContext
from aclcap.graph.compiles import CompileLog
from aclcap.graph.options import StepOptions


@contextlib.contextmanager
def inductor_cache() -> Iterator[None]:
    """Inductor's FX-graph and code caches under aclcap's cache folder (where `--no-cache`
    and the cache budget reach them), for the length of a compile."""
    folder = str(cache_root() / "inductor")
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


class InductorBackend:
    mechanism = "inductor"
    compile_log_in_trace = False  # the capture's own compiles are the code that replays

    def __init__(self, options: StepOptions, export_failed: str | None = None,
                 aoti_refused: str | None = None) -> None:
        """`export_failed`: why torch.export could not take the step; `aoti_refused`: why
        AOTInductor cannot carry what it exported; where either is why this mechanism
        runs (both None: chosen by --cpu-mechanism inductor)."""
        self.options = options
        self.compile_backend = "inductor"
        self.facts = BackendSummary(compile_backend="inductor", export_failed=export_failed,
                                    aoti_refused=aoti_refused)
        self.phases_s: dict[str, float] = {}

    def summary(self) -> BackendSummary:
        return replace(self.facts, inductor_configs=self._configs() or None)

    def _configs(self) -> dict[str, Any]:
        """Inductor's options beyond its defaults: --max-autotune's, and no cache where
        --no-cache asks to compile afresh."""
        configs = self.options.inductor_configs()
        if not self.options.use_cache:
            configs["force_disable_caches"] = True
        return configs

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None,
                log: CompileLog | None = None) -> list[Captured]:
        """Compile at the largest size (then at any size a guard sends back to Inductor),
        and run each size once: that first run is what "capture" costs once compiled."""
        log = log or CompileLog(inductor_compiler(self._configs()), step.spec.path)
        compiled = torch.compile(step.model, backend=log.backend, fullgraph=True)
        order = sorted(sizes, reverse=True)
        captured, compile_s, first_runs = [], 0.0, 0.0
        for size in order:
            if on_size:
                on_size(size)
            static = step.mark(step.inputs(size), size)
            restore(static)
            t0 = time.perf_counter()
            try:
                with torch.no_grad(), inductor_cache():
                    log.call(compiled, size, static)
            except Exception as exc:
                raise CaptureError(f"size {size}: Inductor could not compile the step: "
                                   f"{first_line(exc)}") from exc
            compile_s += time.perf_counter() - t0
            restore(static)
            t1 = time.perf_counter()
            with torch.no_grad():
                compiled(*static)
            first_runs += time.perf_counter() - t1
            captured.append(Captured(size, (time.perf_counter() - t1) * 1e6, 0,
                                     _replayer(compiled), static, static))
        self.facts.compiles = len(log.compiles)
        self.facts.compile_s = round(compile_s, 3)
        self.facts.capture_order = order
        self.phases_s = {"compile_or_load": round(compile_s, 3),
                         "capture": round(first_runs, 3)}
        return captured


def _replayer(compiled: Callable) -> Callable[[tuple], Any]:
    def replay(args: tuple) -> Any:
        with torch.no_grad():
            return compiled(*args)

    return replay
