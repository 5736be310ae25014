"""What a runtime pays per step to keep a step's host values out of its graph: copy each
host value into a persistent tensor the graph reads, before every replay (vLLM keeps
attention metadata this way; vllm-ascend measured its own update, graph_task_update, at
3.68 ms a step against 1.21 ms for the replay). bench times this beside the replay, so the
cost of an argument that would otherwise be frozen shows in the host-overhead table."""

from __future__ import annotations

from collections.abc import Callable

import torch

from aclcap.host_values import host_indices

UPDATE = "host_update"  # the timing key; no mode or row of its own


def host_update(args: tuple) -> Callable[[], None] | None:
    """The per-step update of `args`' host values into persistent tensors (on the device
    of the step's first tensor), or None where the step has no host values."""
    hosts = host_indices(args)
    if not hosts:
        return None
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    values = [args[i] if isinstance(args[i], (list, tuple)) else [args[i]] for i in hosts]
    buffers = [torch.empty(len(v), dtype=torch.float64 if any(isinstance(x, float) for x in v)
                           else torch.int64, device=device) for v in values]

    def update() -> None:
        for value, buffer in zip(values, buffers, strict=True):
            buffer.copy_(torch.tensor(value, dtype=buffer.dtype), non_blocking=True)

    return update
