"""The floor of a model step: the bytes one step must move, counted from the tensors
themselves, at the fastest read pass over a buffer of that many bytes, timed between the
modes' blocks of the same run.
Parameters and buffers are read once (an embedding table only in the rows the step looks
up); inputs (tokens, positions, the KV cache that attention reads) are read once; outputs
and the elements of inputs the step changes (the KV slots it writes) are written once. A
step near its floor spends its time on memory traffic the hardware must do anyway.

Why a read pass over the step's own byte count, not one copy rate for all: a step is
almost all reads (its weights), and a read pass pays no write or read-for-ownership, so a
copy's rate is no bound for it; and a small model's weights stay in the last-level cache
from step to step, where a 64 MiB copy measures DRAM (measured here: tiny_llama's 12 MiB
read at about 140 GB/s against a 64 MiB copy's 26 to 48 GB/s, and a tuned graph ran faster
than a floor priced at the copy's rate).

Which floor it is, a cache floor or a memory floor, is named from the byte count and cpu0's
cache sizes (`floor_level`): a pass over bytes that fit in a cache level runs from that
level once the first pass has brought them in, so the fastest pass is that level's speed;
past the last level it is memory's. Where the sizes cannot be read, every floor is called a
memory floor, which a run whose bytes stay in a cache can beat."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from aclcap._tensors import clone_tensors, wait_collectives
from aclcap.bench.caches import cache_levels, floor_level


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
        if isinstance(a, torch.Tensor) and a.shape == b.shape and not torch.equal(a, b):
            written += int((a != b).sum()) * a.element_size()
    return StepBytes(params, sum(_nbytes(a) for a in args if isinstance(a, torch.Tensor)),
                     written)


def fastest_pass(fn: Callable[[], object], target_s: float) -> tuple[float, int]:
    """The fastest of `fn`'s passes in about `target_s` (three at least), each timed alone
    until the time is up, and how many ran: a count fixed in advance from a pass the load
    slowed would leave a block of a few passes."""
    start = done = time.perf_counter()
    best, passes = math.inf, 0
    while passes < 3 or done - start < target_s:
        t0 = time.perf_counter()
        fn()
        done = time.perf_counter()
        best = min(best, done - t0)
        passes += 1
    return best, passes


class ReadFloor:
    """The floor's rate for one size: a read pass (a max over an integer view: no float
    work, no writes) over a buffer of the step's byte count, touched before, so it sits in
    the cache exactly when the step's bytes would. Timed a block at a time after each block
    of the modes it bounds, in every round, and priced at its fastest pass over all of them: a
    floor is a lower bound, and a loaded machine only ever slows a pass down, so the
    minimum over many passes converges on the hardware's rate where a median follows the
    load (one median of 7 passes here read the same 11 MiB at 1 to 131 GB/s in one run)."""

    def __init__(self, device: str, nbytes: int) -> None:
        self.buf = torch.randint(0, 1 << 20, (max(1, nbytes // 4),), dtype=torch.int32,
                                 device=device)
        self.device = device
        self.passes = 0  # timed passes so far, over every block
        self.best_s = math.inf  # the fastest of them
        # the cpu's cache level the passes run from; a device's caches sysfs does not know
        self.level = floor_level(self.nbytes, cache_levels()) if device == "cpu" else device

    @property
    def nbytes(self) -> int:
        return self.buf.numel() * 4

    def time_block(self, target_s: float) -> None:
        """Passes for about `target_s` (a mode's block). On cpu each pass is timed alone
        (`fastest_pass`). On a device a pass is shorter than a launch and a sync, so a
        block is timed with device events and counts as its mean pass."""
        if self.device == "cpu":
            best, passes = fastest_pass(lambda: torch.amax(self.buf), target_s)
            self.best_s = min(self.best_s, best)
            self.passes += passes
            return
        once = self._device_block(3)  # how many passes make the block
        passes = max(3, min(10_000, int(target_s / max(once, 1e-7))))
        self.best_s = min(self.best_s, once, self._device_block(passes))
        self.passes += 3 + passes

    def _device_block(self, passes: int) -> float:
        """Seconds per pass over a block of `passes`, by device events."""
        mod = getattr(torch, self.device)
        start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
        mod.synchronize()
        start.record()
        for _ in range(passes):
            torch.amax(self.buf)
        end.record()
        mod.synchronize()
        return start.elapsed_time(end) / 1e3 / passes

    @property
    def gbps(self) -> float:
        """The fastest pass's rate in GB/s."""
        return self.nbytes / self.best_s / 1e9
