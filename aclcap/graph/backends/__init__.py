"""Capture backends behind one interface: device graphs (aclgraph, CUDA graph) and AOTI."""

from __future__ import annotations

from aclcap.graph.backends.base import Backend, Captured


def backend_for(device: str, compile_backend: str | None = None) -> Backend:
    """The capture mechanism of a device: aclgraph on npu, cudagraph on cuda, aoti on cpu.
    `compile_backend` (a name or module:function) is what torch.compile uses: on a device,
    for the step that is captured; on cpu, for the compile that records recompiles."""
    from aclcap.graph.compiles import resolve_compile_backend

    chosen = resolve_compile_backend(compile_backend) if compile_backend else None
    if device == "cpu":
        from aclcap.graph.backends.aoti import AotiBackend

        return AotiBackend(compile_backend=chosen)
    from aclcap.graph.backends.device import DeviceGraphBackend

    return DeviceGraphBackend(device, compile_backend=chosen)


__all__ = ["Backend", "Captured", "backend_for"]
