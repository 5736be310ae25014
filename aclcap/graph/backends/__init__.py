"""Capture backends behind one interface: device graphs (aclgraph, CUDA graph) and AOTI."""

from __future__ import annotations

from aclcap.graph.backends.base import Backend, Captured


def backend_for(device: str) -> Backend:
    """The capture mechanism of a device: aclgraph on npu, cudagraph on cuda, aoti on cpu."""
    if device == "cpu":
        from aclcap.graph.backends.aoti import AotiBackend

        return AotiBackend()
    from aclcap.graph.backends.device import DeviceGraphBackend

    return DeviceGraphBackend(device)


__all__ = ["Backend", "Captured", "backend_for"]
