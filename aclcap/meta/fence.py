"""The guard-page CPU allocator (fenced_allocator.cpp) that synthesis runs kernels under:
an overrun of a tensor the kernel allocated faults at once, in every run, where glibc's
heap let it corrupt whatever lay next and crash later by chance. Built on first use into
aclcap's cache (about a second: it includes c10's headers only); where it cannot be built
or loaded (no compiler), kernels run on torch's own allocator, as before."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("fenced_allocator.cpp")


@functools.cache
def library() -> ctypes.CDLL | None:
    """The fence, built and loaded once a process; None where it cannot be. A process that
    forks a child per call loads it first: a child that loads it dies with it, and the
    next one loaded it again (torch-scatter's isolated synthesis took 2.35x as long)."""
    from aclcap.build import BuildError, cache_root, compile_library

    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = cache_root() / "fence" / f"{torch.__version__}-{digest}"
    try:
        return ctypes.CDLL(str(compile_library("aclcap_fenced_allocator", [SOURCE], out,
                                               flags=["-O1"])))
    except (BuildError, OSError):
        return None


@dataclass
class Fence:
    """Whether the fence served the allocations (`on`), and, once it is off, whether a
    block made meanwhile was written outside its bytes (`overran`)."""

    on: bool = False
    overran: bool = False


@contextlib.contextmanager
def fenced(byte: int) -> Iterator[Fence]:
    """torch's CPU allocations meanwhile fenced and filled with `byte`."""
    lib = library()
    fence = Fence(lib is not None and lib.aclcap_fence_on(byte) == 1)
    try:
        yield fence
    finally:
        if fence.on:
            fence.overran = lib.aclcap_fence_off() == 1
