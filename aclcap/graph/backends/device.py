"""aclgraph (npu) and CUDA graphs (cuda): one implementation, the device module passed in.

Per size, largest first, into one shared memory pool: warm up on a side stream, then
capture the torch.compile'd step into a graph over static input buffers. Capture is done
with capture_begin/capture_end directly rather than the `graph()` context manager, whose
entry synchronizes, empties the cache and may gc.collect() each time: slow across many
sizes, which is why vLLM and vllm-ascend patch it out too.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from aclcap.errors import CaptureError, first_line
from aclcap.graph.backends.base import Captured
from aclcap.graph.step import StepContext

MECHANISMS = {"cuda": "cudagraph", "npu": "aclgraph"}
# Ascend's eager kernels are what NPUGraph records; inductor targets CUDA.
COMPILE_BACKENDS = {"cuda": "inductor", "npu": "aot_eager"}
WARMUP_STEPS = 3


class _LastOp(TorchDispatchMode):
    """Remembers the last op dispatched and its model-file line, to name what broke capture."""

    def __init__(self, model_file: Path) -> None:
        super().__init__()
        self.model_file = str(model_file.resolve())
        self.op, self.site = "", ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.op = str(func)
        frames = [f for f in traceback.extract_stack() if f.filename == self.model_file]
        if frames:
            self.site = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}"
        return func(*args, **(kwargs or {}))


class DeviceGraphBackend:
    def __init__(self, device: str) -> None:
        self.device = device
        self.mod = getattr(torch, device)  # torch.cuda, or torch.npu once torch_npu is imported
        self.mechanism = MECHANISMS[device]
        self.facts: dict[str, Any] = {"compile_backend": COMPILE_BACKENDS[device]}

    def summary(self) -> dict[str, Any]:
        return dict(self.facts)

    def _new_graph(self, pool: Any) -> tuple[Any, Callable[[], None]]:
        """A graph and its capture_begin; torch.accelerator.Graph where this device has it."""
        accelerator_graph = getattr(getattr(torch, "accelerator", None), "Graph", None)
        if accelerator_graph is not None:
            try:
                graph = accelerator_graph(pool=pool)
                self.facts["graph_api"] = "torch.accelerator.Graph"
                return graph, graph.capture_begin
            except (RuntimeError, NotImplementedError, TypeError):
                pass  # this device's backend has no accelerator graph: use its own class
        cls = self.mod.CUDAGraph if self.device == "cuda" else self.mod.NPUGraph
        graph = cls()
        self.facts["graph_api"] = f"torch.{self.device}.{cls.__name__}"
        return graph, lambda: graph.capture_begin(pool=pool)

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None) -> list[Captured]:
        compiled = torch.compile(step.model, backend=COMPILE_BACKENDS[self.device])
        stream = self.mod.Stream()
        pool = None
        captured = []
        for size in sorted(sizes, reverse=True):  # largest first: smaller graphs reuse its pool
            if on_size:
                on_size(size)
            static = step.inputs(size)
            before = [t.clone() for t in static]
            stream.wait_stream(self.mod.current_stream())
            with torch.no_grad(), self.mod.stream(stream):
                for _ in range(WARMUP_STEPS):
                    compiled(*static)
            self.mod.current_stream().wait_stream(stream)
            self.mod.synchronize()
            mutated = [i for i, (a, b) in enumerate(zip(before, static, strict=True))
                       if not torch.equal(a, b)]
            graph, begin = self._new_graph(pool)
            reserved = self.mod.memory_reserved()
            recorder = _LastOp(step.spec.path)
            t0 = time.perf_counter()
            try:
                with torch.no_grad(), self.mod.stream(stream):
                    begin()
                    try:
                        with recorder:
                            out = compiled(*static)
                    finally:
                        graph.capture_end()
            except Exception as exc:
                where = f" at {recorder.site}" if recorder.site else ""
                raise CaptureError(f"{recorder.op or 'an op'}{where} cannot be captured (a host "
                                   f"sync or CPU op inside a device capture): "
                                   f"{first_line(exc)}") from exc
            self.mod.synchronize()
            pool = graph.pool()
            captured.append(Captured(size, (time.perf_counter() - t0) * 1e6,
                                     self.mod.memory_reserved() - reserved,
                                     _replayer(graph, static, mutated, out), tuple(static)))
        self.facts["capture_order"] = [c.size for c in captured]
        return captured


def _replayer(graph: Any, static: tuple, mutated: list[int], out: Any
              ) -> Callable[[tuple], Any]:
    """Copy inputs into the static buffers (skipped when they are the buffers), replay, and
    copy mutated buffers back, so a caller's KV cache ends as eager would leave it. The
    outputs are the graph's static outputs: valid until the next replay."""

    def replay(args: tuple) -> Any:
        for buffer, arg in zip(static, args, strict=True):
            if arg.data_ptr() != buffer.data_ptr():
                buffer.copy_(arg)
        graph.replay()
        for i in mutated:
            if args[i].data_ptr() != static[i].data_ptr():
                args[i].copy_(static[i])
        return out

    return replay
