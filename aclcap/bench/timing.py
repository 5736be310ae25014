"""Time one step of a callable in blocks: wall time per step and, on a device, host time
(issuing without synchronizing) and device time (events). torch.utils.benchmark times a
block on the CPU; on a device the issue time must be read before the sync, which its Timer
cannot do, so device blocks are timed here by hand."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import benchmark

BLOCK_S = 0.02  # a block's length: timer overhead negligible, short beside the machine's drift


@dataclass
class BlockTime:
    step_us: float
    host_us: float
    device_us: float | None


def _timer(fn: Callable[[], object]) -> benchmark.Timer:
    """A Timer on all of torch's threads: its default is one thread, which would time every
    mode single-threaded, unlike any real step (and unfairly to the parallel kernels)."""
    return benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())


def steps_for(fn: Callable[[], object], target_s: float = BLOCK_S) -> int:
    """How many steps make a block of about `target_s`, so timer overhead is negligible."""
    once = _timer(fn).timeit(3).mean
    return max(1, min(100_000, int(target_s / max(once, 1e-7))))


def time_block(fn: Callable[[], object], steps: int, device: str) -> BlockTime:
    if device == "cpu":
        step = _timer(fn).timeit(steps).mean * 1e6
        return BlockTime(step, step, None)
    mod = getattr(torch, device)
    start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
    mod.synchronize()
    t0 = time.perf_counter()
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    issued = time.perf_counter()
    mod.synchronize()
    done = time.perf_counter()
    return BlockTime((done - t0) * 1e6 / steps, (issued - t0) * 1e6 / steps,
                     start.elapsed_time(end) * 1e3 / steps)


def time_settled_steps(fn: Callable[[], object], steps: int,
                       settle: Callable[[], None]) -> BlockTime:
    """Mean step time with `settle()` before each step, outside the timed span: for ranks
    on cpu, whose artifact runs must not start while gloo still frees earlier work."""
    total = 0.0
    for _ in range(steps):
        settle()
        t0 = time.perf_counter()
        fn()
        total += time.perf_counter() - t0
    step = total * 1e6 / steps
    return BlockTime(step, step, None)
