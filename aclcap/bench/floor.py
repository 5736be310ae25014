"""The memory floor of a model step: the bytes one step must move, counted from the tensors
themselves, at the read bandwidth of a buffer of that many bytes, measured in the same run.
Parameters and buffers are read once (an embedding table only in the rows the step looks
up); inputs (tokens, positions, the KV cache that attention reads) are read once; outputs
and the elements of inputs the step changes (the KV slots it writes) are written once. A
step near its floor spends its time on memory traffic the hardware must do anyway.

Why a read pass over the step's own byte count, not one copy rate for all: a step is
almost all reads (its weights), and a read pass pays no write or read-for-ownership, so a
copy's rate is no bound for it; and a small model's weights stay in the last-level cache
from step to step, where a 64 MiB copy measures DRAM (measured here: tiny_llama's 12 MiB
read at about 140 GB/s against a 64 MiB copy's 26 to 48 GB/s, and a tuned graph ran faster
than a floor priced at the copy's rate)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from aclcap._tensors import clone_tensors, wait_collectives
from aclcap.devices import synchronizer


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
    looked_up: list[int] = []  # bytes of the embedding rows the step gathers

    def count_rows(module: torch.nn.Embedding, inputs: tuple, _out: object) -> None:
        row = module.weight.shape[1] * module.weight.element_size()
        looked_up.append(min(inputs[0].numel() * row, _nbytes(module.weight)))

    tables = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    hooks = [m.register_forward_hook(count_rows) for m in tables]
    after = clone_tensors(args)
    try:
        with torch.no_grad():
            out = wait_collectives(model(*after))
    finally:
        for hook in hooks:
            hook.remove()
    if looked_up:  # a table the step never called stays counted whole
        params += sum(looked_up) - sum(_nbytes(m.weight) for m in tables)
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    written = sum(_nbytes(o) for o in outputs if isinstance(o, torch.Tensor))
    for a, b in zip(args, after, strict=True):  # changed elements of mutated inputs
        if a.shape == b.shape and not torch.equal(a, b):
            written += int((a != b).sum()) * a.element_size()
    return StepBytes(params, sum(_nbytes(a) for a in args), written)


def read_bandwidth(device: str, nbytes: int) -> float:
    """Bytes per second of a read pass (a max over an integer view: no float work, no
    writes) over a buffer of `nbytes`, touched before: in the cache exactly when a step's
    `nbytes` would be. The bandwidth the floor is priced at."""
    buf = torch.randint(0, 1 << 20, (max(1, nbytes // 4),), dtype=torch.int32, device=device)
    sync = synchronizer(device)
    times = []
    for _ in range(9):
        sync()
        t0 = time.perf_counter()
        torch.amax(buf)
        sync()
        times.append(time.perf_counter() - t0)
    return buf.numel() * 4 / statistics.median(times[2:])
