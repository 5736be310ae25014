"""Capture backends behind one interface: device graphs (aclgraph, CUDA graph) and AOTI."""

from __future__ import annotations

from aclcap.graph.backends.base import Backend, Captured


def backend_for(device: str, compile_backend: str | None = None,
                max_autotune: bool = False) -> Backend:
    """The capture mechanism of a device: aclgraph on npu, cudagraph on cuda, aoti on cpu.
    `compile_backend` (a name or module:function) is what torch.compile uses: on a device,
    for the step that is captured; on cpu, for the compile that records recompiles.
    `max_autotune` tunes the cpu artifact; a device graph captures what the compile backend
    makes, so there it is a --compile-backend choice."""
    from aclcap.errors import UsageError
    from aclcap.graph.compiles import resolve_compile_backend

    if max_autotune and device != "cpu":
        raise UsageError(f"--max-autotune tunes the cpu backend's AOTI artifact; on {device} "
                         "choose the compile backend with --compile-backend instead")

    chosen = resolve_compile_backend(compile_backend) if compile_backend else None
    if device == "cpu":
        from aclcap.graph.backends.aoti import AotiBackend

        return AotiBackend(compile_backend=chosen, max_autotune=max_autotune)
    from aclcap.graph.backends.device import DeviceGraphBackend

    return DeviceGraphBackend(device, compile_backend=chosen)


__all__ = ["Backend", "Captured", "backend_for"]
