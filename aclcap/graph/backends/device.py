"""aclgraph (npu) and CUDA graphs (cuda): one implementation, the device module passed in.

Every size is warmed up first; then per size, largest first, into one shared memory pool,
capture the torch.compile'd step into a graph over static input buffers. Capture is done
with capture_begin/capture_end directly rather than the `graph()` context manager, whose
entry synchronizes, empties the cache and may gc.collect() each time: slow across many
sizes, which is why vLLM and vllm-ascend patch it out too.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from aclcap import _compat
from aclcap._tensors import clone_tensors
from aclcap.draw_state import restore
from aclcap.errors import CaptureError, first_line
from aclcap.graph.backends.base import BackendSummary, Captured, StepContext
from aclcap.graph.compiles import CompileLog

MECHANISMS = {"cuda": "cudagraph", "npu": "aclgraph"}
# Ascend's eager kernels are what NPUGraph records; inductor targets CUDA.
COMPILE_BACKENDS = {"cuda": "inductor", "npu": "aot_eager"}
WARMUP_STEPS = 3


def _compile_count() -> tuple[int, int]:
    """Dynamo's frame and graph counters: they move when anything compiles."""
    counters = _compat.dynamo_counters()
    return sum(counters["frames"].values()), counters["stats"]["unique_graphs"]


def _failure_site(exc: BaseException, model_file: Path) -> str:
    """The model-file line in the exception's traceback, with its source text."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve() == model_file.resolve()]
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {model_file.name}:{frame.lineno} (`{(frame.line or '').strip()}`)"


class DeviceGraphBackend:
    """`mod` is the device module (torch.cuda, torch.npu once torch_npu is imported); the
    protocol test passes a stand-in. `compile_backend` is what torch.compile uses."""

    compile_log_in_trace = False  # the warm-up's compiles are the code that is captured

    def __init__(self, device: str, mod: Any = None, compile_backend: Any = None) -> None:
        self.device = device
        self.mod = mod if mod is not None else getattr(torch, device)
        self.mechanism = MECHANISMS[device]
        self.compile_backend = compile_backend or COMPILE_BACKENDS[device]
        self.facts = BackendSummary(compile_backend=str(self.compile_backend))
        self.phases_s: dict[str, float] = {}  # warm-up compiles and captures interleave

    def summary(self) -> BackendSummary:
        return replace(self.facts)

    def _new_graph(self, pool: Any) -> tuple[Any, Callable[[], None]]:
        """A graph and its capture_begin; torch.accelerator.Graph where this device has it."""
        accelerator_graph = _compat.accelerator_graph()
        if accelerator_graph is not None:
            try:
                graph = accelerator_graph(pool=pool)
                self.facts.graph_api = "torch.accelerator.Graph"
                return graph, graph.capture_begin
            except (RuntimeError, NotImplementedError, TypeError):
                pass  # this device's backend has no accelerator graph: use its own class
        cls = self.mod.CUDAGraph if self.device == "cuda" else self.mod.NPUGraph
        graph = cls()
        self.facts.graph_api = f"torch.{self.device}.{cls.__name__}"
        return graph, lambda: graph.capture_begin(pool=pool)

    def _warm_up(self, compiled: Callable, stream: Any, size: int, static: tuple,
                 log: CompileLog) -> list[int]:
        """Run the compiled step on the side stream (the first call through the compile
        log: that is where a size compiles); which inputs it mutates."""
        before = clone_tensors(list(static))
        restore(static)
        stream.wait_stream(self.mod.current_stream())
        with torch.no_grad(), self.mod.stream(stream):
            log.call(compiled, size, static)
            for _ in range(WARMUP_STEPS - 1):
                compiled(*static)
        self.mod.current_stream().wait_stream(stream)
        self.mod.synchronize()
        return [i for i, (a, b) in enumerate(zip(before, static, strict=True))
                if isinstance(a, torch.Tensor) and not torch.equal(a, b)]

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None,
                log: CompileLog | None = None) -> list[Captured]:
        """Warm up every size first, so that nothing compiles inside a capture; then capture
        largest first into one pool. No dispatch mode or other Python hook is active around
        the compiled call: under one, Dynamo would run the model eagerly and the graph would
        hold eager kernels instead of the compiled code. The warm-up's compiles go to `log`."""
        log = log or CompileLog(self.compile_backend, step.spec.path)
        compiled = torch.compile(step.model, backend=log.backend)
        stream = self.mod.Stream()
        order = sorted(sizes, reverse=True)  # largest first: smaller graphs reuse its pool
        statics = {size: step.mark(step.inputs(size), size) for size in order}
        mutated = {size: self._warm_up(compiled, stream, size, statics[size], log)
                   for size in order}
        self.facts.compiles = len(log.compiles)
        pool = None
        captured = []
        for size in order:
            if on_size:
                on_size(size)
            static = statics[size]
            restore(static)  # drawn before the other sizes were: its forward context again
            graph, begin = self._new_graph(pool)
            reserved = self.mod.memory_reserved()
            compiles = _compile_count()
            t0 = time.perf_counter()
            try:
                with torch.no_grad(), self.mod.stream(stream):
                    begin()
                    try:
                        out = compiled(*static)
                    finally:
                        graph.capture_end()
            except Exception as exc:
                raise CaptureError(f"size {size}{_failure_site(exc, step.spec.path)} cannot be "
                                   "captured (a host sync or CPU op inside a device capture): "
                                   f"{first_line(exc)}") from exc
            if _compile_count() != compiles:
                raise CaptureError(f"size {size}: torch.compile compiled again inside the "
                                   "capture, after every size was warmed up (a guard on this "
                                   "size failed): capture would record a host-side compile")
            self.mod.synchronize()
            pool = graph.pool()
            captured.append(Captured(size, (time.perf_counter() - t0) * 1e6,
                                     self.mod.memory_reserved() - reserved,
                                     _replayer(graph, static, mutated[size], out),
                                     tuple(static), tuple(static)))
        self.facts.capture_order = [c.size for c in captured]
        return captured


def _replayer(graph: Any, static: tuple, mutated: list[int], out: Any
              ) -> Callable[[tuple], Any]:
    """Copy inputs into the static buffers (skipped when they are the buffers), replay, and
    copy mutated buffers back, so a caller's KV cache ends as eager would leave it. The
    outputs are the graph's static outputs: valid until the next replay."""

    def replay(args: tuple) -> Any:
        for buffer, arg in zip(static, args, strict=True):
            # a host value is replayed as captured: the graph holds it (frozen)
            if isinstance(arg, torch.Tensor) and arg.data_ptr() != buffer.data_ptr():
                buffer.copy_(arg)
        graph.replay()
        for i in mutated:
            if args[i].data_ptr() != static[i].data_ptr():
                args[i].copy_(static[i])
        return out

    return replay
