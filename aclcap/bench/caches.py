"""Which floor a byte count gets: cpu0's cache levels, read from sysfs, and the level a
pass over that many bytes kept hot runs from. Apart from floor.py, without torch: the
report names the level, and bench's arguments are checked before torch is imported."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
MEMORY = "memory"  # the floor level of bytes past the last cache level (or of unknown caches)


@dataclass(frozen=True)
class CacheLevel:
    """One of cpu0's data caches: its level and its size (one instance's: a core's own L2,
    the L3 its cores share)."""

    level: int
    nbytes: int

    @property
    def name(self) -> str:
        return f"L{self.level}"


def parse_cache_size(text: str) -> int:
    """sysfs's `32K`, `1024K` or `32M` in bytes."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


@functools.cache
def cache_levels(root: Path = SYSFS_CACHE) -> tuple[CacheLevel, ...]:
    """cpu0's data and unified caches, smallest level first, from sysfs; none where sysfs
    does not say (another OS, a container without it): then every floor is a memory floor,
    and says so, rather than a cache level guessed."""
    sizes: dict[int, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            sizes[int((index / "level").read_text())] = parse_cache_size(
                (index / "size").read_text())
        except (OSError, ValueError):  # an entry half there: the others still count
            continue
    return tuple(CacheLevel(level, n) for level, n in sorted(sizes.items()) if n > 0)


def floor_level(nbytes: int, levels: Sequence[CacheLevel]) -> str:
    """Where a pass over `nbytes` kept hot runs: the smallest cache level that holds them
    (`L2`), or `memory` past the last one. A floor must be timed where the work it bounds
    runs: a kernel whose bytes sit in a cache beats a floor read from memory."""
    return next((c.name for c in sorted(levels, key=lambda c: c.level) if nbytes <= c.nbytes),
                MEMORY)
