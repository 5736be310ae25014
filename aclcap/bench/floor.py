"""The memory floor of a model step: the bytes one step must move, counted from the tensors
themselves, at the copy bandwidth measured in the same run. Parameters and buffers are read
once; inputs (tokens, positions, the KV cache that attention reads) are read once; outputs
and the elements of inputs the step changes (the KV slots it writes) are written once. A
step near its floor spends its time on memory traffic the hardware must do anyway."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from aclcap._tensors import clone_tensors, wait_collectives

COPY_BYTES = 64 << 20


@dataclass
class StepBytes:
    params_bytes: int
    inputs_bytes: int
    written_bytes: int

    @property
    def total(self) -> int:
        return self.params_bytes + self.inputs_bytes + self.written_bytes


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def step_bytes(model: torch.nn.Module, args: tuple) -> StepBytes:
    """Run one eager step on a copy of `args` and count what it had to read and write."""
    params = sum(_nbytes(t) for t in [*model.parameters(), *model.buffers()])
    after = clone_tensors(args)
    with torch.no_grad():
        out = wait_collectives(model(*after))
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    written = sum(_nbytes(o) for o in outputs if isinstance(o, torch.Tensor))
    for a, b in zip(args, after, strict=True):  # changed elements of mutated inputs
        if a.shape == b.shape and not torch.equal(a, b):
            written += int((a != b).sum()) * a.element_size()
    return StepBytes(params, sum(_nbytes(a) for a in args), written)


def copy_bandwidth(device: str, nbytes: int = COPY_BYTES) -> float:
    """Bytes per second of a copy between two prefaulted buffers (each byte read and written
    once): the bandwidth the floor is priced at."""
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src).copy_(src)
    sync = getattr(torch, device).synchronize if device != "cpu" else (lambda: None)
    times = []
    for _ in range(7):
        sync()
        t0 = time.perf_counter()
        dst.copy_(src)
        sync()
        times.append(time.perf_counter() - t0)
    return 2 * nbytes / statistics.median(times)
