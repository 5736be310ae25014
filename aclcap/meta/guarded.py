"""Copies of a call's tensors that keep their exact layout and lie in front of a guard
band, so that a kernel writing past an input's end is caught, not left to corrupt the
worker. torch.clone makes a strided slice dense (a kernel would never see the layout a
variation made), and an old-API kernel that checks no index (torch-scatter's scatter along
a dim its index overruns) writes into whatever follows: the heap's own bookkeeping, or the
next call's tensors, which then read as written or abort the worker calls later. No
library offers such a band around a tensor (sanitizers instrument the whole process), so
it is written here: the band is filled with one byte and read back after the call. A call
run twice gets another byte the second time, so that a read past an input's end differs
between the runs (faults.py) as it did on the heap's own leftovers."""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from aclcap._compat import tree_map_only
from aclcap.meta.fence import Fence, fenced

FILL, OTHER_FILL = 0xA5, 0x5A  # a second run's band differs: a read past the end shows
_M_PERTURB = -6  # glibc's mallopt parameter: fill allocations with a byte's complement
_MIN_BAND_BYTES = 4096  # past a small tensor, an overrun of a few rows still lands here
# A view deep into a large storage (a layer of a KV cache) is copied densely, as
# torch.clone does, rather than with the unset storage before its offset.
_MAX_PREFIX_BYTES = 2**26


def _span(t: torch.Tensor) -> int:
    """Elements of storage the tensor reaches, from its storage's start."""
    return t.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(),
                                                                     strict=True))


def _exactly_copied(t: torch.Tensor) -> bool:
    return type(t) in (torch.Tensor, torch.nn.Parameter) and t.layout == torch.strided \
        and t.device.type != "meta" and t.numel() > 0 and not t.is_quantized \
        and not t.is_complex() and min(t.stride(), default=1) >= 0 \
        and t.storage_offset() * t.element_size() <= _MAX_PREFIX_BYTES


@dataclass
class Guards:
    """The bands of one call's copies (none unless `banded`); `overrun()` names the first
    copy written past."""

    banded: bool = True
    fill: int = FILL
    bands: list[tuple[int, torch.Tensor]] = field(default_factory=list)  # (copy id, band)

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """`t` copied with its own shape, strides and storage offset (the storage before the
        offset is left unset), followed by a band as long as itself, at least
        _MIN_BAND_BYTES."""
        if not _exactly_copied(t):
            return torch.clone(t)
        span, start = _span(t), t.storage_offset()
        band = max(span - start, -(-_MIN_BAND_BYTES // t.element_size())) if self.banded else 0
        buf = torch.empty(span + band, dtype=t.dtype, device=t.device)
        buf[start:span].copy_(t.detach().as_strided((span - start,), (1,), start))
        out = buf.as_strided(t.shape, t.stride(), start).requires_grad_(t.requires_grad)
        if band:
            buf[span:].view(torch.uint8).fill_(self.fill)
            self.bands.append((id(out), buf[span:]))
        return out

    def copies(self, value: Any) -> Any:
        """Every tensor in a (nested) value copied (`copy`)."""
        return tree_map_only(torch.Tensor, self.copy, value)

    def overrun(self, named: list[tuple[str, torch.Tensor]]) -> str | None:
        """The name (from `named`, the call's copies by argument) of the first copy whose
        band the call wrote, else None."""
        names = {id(t): name for name, t in named}
        for key, band in self.bands:
            if not bool((band.view(torch.uint8) == self.fill).all()):
                return names.get(key, "an input")
        return None


def exact_copies(value: Any) -> Any:
    """Every tensor in a (nested) value copied with its own layout, without a band: a rerun
    of a recorded call (check-meta's compile and opcheck checks) sees the layout the
    recorded run saw, so a kernel that ignores strides gives the same values in both."""
    return Guards(banded=False).copies(value)


@contextlib.contextmanager
def filled_allocations(byte: int) -> Iterator[Fence]:
    """Every allocation the kernel makes meanwhile starts filled with `byte` ^ 0xff (glibc's
    M_PERTURB; where the C library has no mallopt, nothing changes): an output the kernel
    leaves partly unwritten then reads another byte in each of two runs. Leftovers of freed
    memory told it apart only by chance, and two runs that reused one block read the same
    (fbgemm's expand_into_jagged_permute, asked for more entries than its offsets hold,
    passed as clean in one run of a command and left garbage in its compiled copy in the
    next). Python's own objects lie in pymalloc's arenas, untouched. torch's own allocations
    are fenced besides (fence.py), filled with the same byte: one written past faults
    there, in every run, and one written just past (within its alignment) is told once the
    body ends (the Fence it yields)."""
    mallopt = getattr(libc(), "mallopt", None)
    perturbed = mallopt is not None and mallopt(_M_PERTURB, byte)
    try:
        with fenced(byte ^ 0xFF) as fence:
            yield fence
    finally:
        if perturbed:
            mallopt(_M_PERTURB, 0)


@functools.cache
def libc() -> object:
    """This process's C library (None where it cannot be opened)."""
    try:
        return ctypes.CDLL(None)  # this process's own C library, whichever it is
    except OSError:
        return None
