"""PROTOCOL TEST, not device verification: DeviceGraphBackend driven on cpu with a stand-in
device module (streams, synchronize, memory_reserved, a Graph that records what ran between
capture_begin and capture_end and replays it). It proves the backend's call sequence: the
compiled code (not eager kernels) runs inside each capture, no dispatch mode is active
there, sizes are captured largest first into one pool, static buffers are reused and
mutated inputs are copied back. Real CUDA graphs and aclgraph are verified only by
scripts/device_check.sh on a device."""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

from aclcap.graph.backends.device import DeviceGraphBackend
from aclcap.graph.step import StepContext, tolerance_for


class _Stream:
    def wait_stream(self, other: _Stream) -> None:
        pass


class StandInDevice:
    """What DeviceGraphBackend needs of torch.cuda / torch.npu, on cpu."""

    def __init__(self) -> None:
        self.recording: StandInGraph | None = None
        self.graphs: list[StandInGraph] = []
        self._stream = _Stream()

    def Stream(self) -> _Stream:
        return _Stream()

    @contextlib.contextmanager
    def stream(self, s: _Stream):
        yield

    def current_stream(self) -> _Stream:
        return self._stream

    def synchronize(self) -> None:
        pass

    def memory_reserved(self) -> int:
        return 0

    def CUDAGraph(self) -> StandInGraph:
        graph = StandInGraph(self)
        self.graphs.append(graph)
        return graph


class StandInGraph:
    """Records the compiled graph calls made while capturing; replay re-runs them on the
    same (static) tensors, as a device graph replays its kernels on the same buffers."""

    def __init__(self, device: StandInDevice) -> None:
        self.device, self.calls, self.pool_in, self.mode_at_begin = device, [], "unset", None

    def capture_begin(self, pool=None) -> None:
        self.pool_in, self.mode_at_begin = pool, _get_current_dispatch_mode()
        self.device.recording = self

    def capture_end(self) -> None:
        self.device.recording = None

    def pool(self) -> tuple:
        return ("pool", id(self.device.graphs[0]))

    def replay(self) -> None:
        for fn, args, outputs in self.calls:  # new values into the same output buffers
            for old, new in zip(outputs, fn(*args), strict=True):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)


class Step(nn.Module):
    """A step that mutates its cache input in place, as a KV-cache write does."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, cache):
        cache.add_(x.sum(0))
        return self.proj(x).relu() * 2


def _step(model: nn.Module) -> StepContext:
    class _Spec:
        path = __import__("pathlib").Path(__file__)

    def inputs(size: int) -> tuple:
        return torch.randn(size, 8), torch.zeros(8)

    ctx = StepContext(_Spec(), model, "cpu", torch.float32, "float32", [[0], []],
                      tolerance_for(torch.float32, None), None)  # type: ignore[arg-type]
    ctx.inputs = inputs  # type: ignore[method-assign]
    return ctx


def test_protocol_compiled_code_is_what_gets_captured():
    device = StandInDevice()

    def recording_backend(gm: torch.fx.GraphModule, example_inputs):
        def run(*args):
            outputs = gm.forward(*args)
            if device.recording is not None:
                device.recording.calls.append((gm.forward, args, outputs))
            return outputs

        return run

    torch._dynamo.reset()
    backend = DeviceGraphBackend("cuda", mod=device, compile_backend=recording_backend)
    model = Step().requires_grad_(False)
    captured = backend.capture(_step(model), [1, 4, 2])
    assert [c.size for c in captured] == [4, 2, 1]  # largest first
    for graph in device.graphs:
        assert graph.mode_at_begin is None  # no dispatch mode around the compiled call
        assert graph.calls, "the compiled graph did not run inside the capture"
    assert device.graphs[0].pool_in is None
    assert all(g.pool_in == device.graphs[0].pool() for g in device.graphs[1:])  # one pool
    cap = captured[0]
    x, cache = torch.randn(4, 8), torch.ones(8)
    with torch.no_grad():
        want_cache = cache.clone().add_(x.sum(0))
        want = model.proj(x).relu() * 2
        got = cap.replay((x, cache))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(cache, want_cache)  # the mutated input is copied back
    static_ptr = cap.static_inputs[0].data_ptr()
    with torch.no_grad():
        cap.replay(cap.static_inputs)  # the graph's own buffers: nothing is copied
    assert cap.static_inputs[0].data_ptr() == static_ptr


def test_protocol_warm_up_records_compiles_and_none_happen_in_capture():
    """Sizes >= 2 share one dynamic graph (their dims are marked dynamic up front); size 1
    recompiles (0/1 specialization) during warm-up, never inside a capture."""
    from aclcap.graph.compiles import CompileLog

    device = StandInDevice()
    torch._dynamo.reset()
    backend = DeviceGraphBackend("cuda", mod=device, compile_backend="eager")
    log = CompileLog("eager")
    backend.capture(_step(Step().requires_grad_(False)), [1, 2, 4, 8], log=log)
    assert [(c.size, c.kind) for c in log.compiles] == [
        (8, "first_compile"), (1, "0/1_specialization")]
    assert log.compiles[0].dynamic == {"x": [0]}
    assert backend.summary().compiles == 2
