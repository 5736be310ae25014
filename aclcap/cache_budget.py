"""aclcap's cache within a size budget, least recently used entries removed first.

An edit loop writes new entries on every change (an AOTI artifact holds the model's
weights, so a real model's is gigabytes), and an entry is never read again once the code
it was keyed on moved on: unbounded, the cache fills the disk. ccache and pip cap their
caches the same way. Written here because no library in aclcap's dependencies prunes a
directory tree by size (diskcache would own the storage format of every entry).

Only what aclcap writes per run is pruned: AOTI artifacts and their indexes, cached traces
and check-meta rows. Build outputs and lock files are never touched, nor any file written
in the last minute (a run that is using it now). A hit refreshes its entry's time
(`touch`), so "least recently used" means used, not written."""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from aclcap.build import cache_root
from aclcap.errors import UsageError

ENV = "ACLCAP_CACHE_MAX"
DEFAULT_MAX_BYTES = 10 * 2**30
PRUNED = ("aoti", "capture", "check-meta")  # the per-run entries (module doc)
KEEP_FRACTION = 0.8  # prune to this much of the budget, so the next runs need not prune
IN_USE_S = 60.0
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class Pruned:
    """What one pass removed, and what the cache holds after it."""

    removed: int
    freed_bytes: int
    total_bytes: int


def max_bytes() -> int | None:
    """The budget from $ACLCAP_CACHE_MAX (`500M`, `20G`, bytes; `0`: no limit), else
    DEFAULT_MAX_BYTES."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", text, re.IGNORECASE)
    if match is None:
        raise UsageError(f"{ENV}={text}: not a size; give bytes or a size such as 500M or "
                         "20G (0: no limit)")
    size = int(float(match[1]) * _UNITS[match[2].upper()])
    return size or None


def touch(path: Path) -> None:
    """Mark an entry used now (a cache hit): pruning goes by this time."""
    with contextlib.suppress(OSError):
        os.utime(path)


def _entries(root: Path) -> list[tuple[float, int, Path]]:
    """(mtime, size, path) of every prunable file, oldest first."""
    found = []
    for name in PRUNED:
        for path in (root / name).rglob("*"):
            if "locks" in path.relative_to(root).parts or path.name.endswith(".lock"):
                continue
            with contextlib.suppress(OSError):  # removed meanwhile by another run
                stat = path.stat()
                if path.is_file():
                    found.append((stat.st_mtime, stat.st_size, path))
    return sorted(found)


def prune(root: Path | None = None, limit: int | None = None,
          now: float | None = None) -> Pruned:
    """Remove the least recently used entries while the cache is over `limit` (default
    `max_bytes()`), down to KEEP_FRACTION of it; files used in the last IN_USE_S seconds
    stay whatever the total."""
    root = cache_root() if root is None else root
    limit = max_bytes() if limit is None else limit
    entries = _entries(root)
    total = sum(size for _, size, _ in entries)
    removed = freed = 0
    if limit is None or total <= limit:
        return Pruned(0, 0, total)
    now = time.time() if now is None else now
    for mtime, size, path in entries:
        if total <= limit * KEEP_FRACTION or now - mtime < IN_USE_S:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            removed, freed, total = removed + 1, freed + size, total - size
    return Pruned(removed, freed, total)
