"""Capture backends behind one interface: device graphs (aclgraph, CUDA graph) and AOTI."""

from __future__ import annotations

from aclcap.graph.backends.base import Backend, Captured
from aclcap.graph.options import StepOptions


def backend_for(device: str, options: StepOptions) -> Backend:
    """The capture mechanism of a device: aclgraph on npu, cudagraph on cuda, aoti on cpu.
    `options.compile_backend` (a name or module:function) is what torch.compile uses: on a
    device, for the step that is captured; on cpu, for the compile that records recompiles.
    `options.max_autotune` tunes the cpu artifact; a device graph captures what the compile
    backend makes, so there it is a --compile-backend choice."""
    from aclcap.errors import UsageError
    from aclcap.graph.compiles import resolve_compile_backend

    compile_backend = options.compile_backend
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
    if device == "cpu":
        from aclcap.graph.backends.aoti import AotiBackend

        return AotiBackend(options, compile_backend=chosen)
    from aclcap.graph.backends.device import DeviceGraphBackend

    return DeviceGraphBackend(device, compile_backend=chosen)


__all__ = ["Backend", "Captured", "backend_for"]
