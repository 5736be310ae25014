"""`--ops`: each bundled op's floor made a lower bound at every shape, and named.

aclcap_ops/opbench.py times every op against a pass with the op's own access pattern over
its own tensors. Past the last-level cache that pass is the floor (its bytes come from
memory, and the floor timed as its own kernel reads 1). Where the op's bytes fit in a cache
the pattern pass runs from that cache too, but its torch calls, not its bytes, set its time:
rotary_embedding's floor is two bitwise_or_ passes and reshape_and_cache's a copy per run of
blocks, where the fused kernel makes one call, and such kernels read 0.73 to 0.88x of that
floor on an idle machine (issue 58). There the floor is also the fastest single call that
moves as many bytes in one buffer kept in that cache, and the faster of the two counts."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch

from aclcap.bench.caches import MEMORY, CacheLevel, cache_levels, floor_level
from aclcap.bench.floor import fastest_pass
from aclcap_ops.opbench import OpBenchRow

ROUNDS = 5  # blocks per cache floor; the rows take turns, so each spreads over the timing
BLOCK_S = 0.04  # one block of a cache floor's passes, over its kinds and thread counts


@dataclass(frozen=True)
class BoundedOpRow(OpBenchRow):
    """An --ops row that says which floor bounds it: a cache level (`L2`: its bytes fit
    there, and the floor is the faster of its pattern pass and a cache floor) or `memory`
    (its pattern pass)."""

    floor_level: str = MEMORY


class CacheFloor:
    """The fastest one-call pass that moves `nbytes` in one buffer of that many bytes kept
    in the cache: a read pass over all of them (a max over integers, as the step's floor)
    or a read-modify-write pass over half (bitwise_or_(0): each byte read and written
    back), whichever runs faster here (the max's reduction trails a plain loop in L2 and
    L3), each on one thread and on all (`_threads`)."""

    def __init__(self, nbytes: int) -> None:
        buf = torch.randint(0, 1 << 20, (max(2, nbytes // 4),), dtype=torch.int32)
        half = buf[: buf.numel() // 2]
        self.passes = (lambda: torch.amax(buf), lambda: half.bitwise_or_(0))
        self.best_s = math.inf

    def time_block(self, target_s: float) -> None:
        """Every pass on every thread count, for about `target_s` in all."""
        threads = sorted({1, torch.get_num_threads()})
        for n in threads:
            with _threads(n):
                for one in self.passes:
                    best, _ = fastest_pass(one, target_s / len(threads) / len(self.passes))
                    self.best_s = min(self.best_s, best)


@contextmanager
def _threads(n: int) -> Iterator[None]:
    """torch's threads set to `n` for a block of passes. A kernel runs a small shape on one
    thread (reshape_and_cache at 32 bfloat16 tokens is one task of its grain) and a large
    one on all: a pass on all threads pays a fork and join that a one-thread kernel does
    not, and a pass on one thread lacks the other cores' bandwidth."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def bound_op_floors(rows: Sequence[OpBenchRow],
                    levels: Sequence[CacheLevel] | None = None) -> list[BoundedOpRow]:
    """The rows with a cache floor where their bytes fit in a cache level (`levels`:
    cpu0's). The cache floors are timed here, taking turns block by block, so that a slow
    phase of a shared machine meets every row's passes in part, not one row's in whole;
    each is priced at its fastest pass, as the step's floor is."""
    levels = cache_levels() if levels is None else levels
    at = [floor_level(row.bytes_moved, levels) for row in rows]
    floors = {row.bytes_moved: CacheFloor(row.bytes_moved)
              for row, level in zip(rows, at, strict=True) if level != MEMORY}
    for _ in range(ROUNDS):
        for floor in floors.values():
            floor.time_block(BLOCK_S)
    return [bounded_row(row, level, floors[row.bytes_moved].best_s * 1e6
                        if row.bytes_moved in floors else None)
            for row, level in zip(rows, at, strict=True)]


def bounded_row(row: OpBenchRow, level: str, cache_us: float | None) -> BoundedOpRow:
    """`row` at its floor level; where its cache floor (`cache_us`, the fastest pass) beat
    its pattern pass, with that for its floor: the faster of two passes that each move the
    row's bytes is the lower bound."""
    fields = asdict(row)
    if cache_us is not None and cache_us < row.floor_us:
        fields.update(floor_us=cache_us, floor_gbps=row.bytes_moved / cache_us / 1e3,
                      kernel_over_floor=row.kernel_best_us / cache_us)
    return BoundedOpRow(**fields, floor_level=level)
