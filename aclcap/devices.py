"""Which backends this machine has, and why the others are absent (never faked).

torch is imported where a question needs it, so that a bad device name or --nproc on cpu
is refused before the CLI pays for importing torch."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable

from aclcap.errors import UsageError

DEVICES = ("npu", "cuda", "cpu")


def unavailable_reason(device: str) -> str | None:
    """None when `device` can run here, else a one-line reason naming what is missing."""
    if device == "cpu":
        return None
    if device == "cuda":
        import torch

        if torch.version.cuda is None:
            return f"cuda: torch {torch.__version__} is a CPU-only build"
        if not torch.cuda.is_available():
            return "cuda: no GPU found (torch.cuda.is_available() is False)"
        return None
    if device == "npu":
        if importlib.util.find_spec("torch_npu") is None:
            return "npu: torch_npu not installed (pip install 'aclcap[npu]')"
        try:
            import torch
            import torch_npu  # noqa: F401
        except ImportError as exc:
            return f"npu: CANN not found ({exc})"
        if not torch.npu.is_available():
            return "npu: no Ascend device found (torch.npu.is_available() is False)"
        return None
    raise UsageError(f"unknown device {device!r}: choose one of auto, {', '.join(DEVICES)}")


def synchronizer(device: str) -> Callable[[], None]:
    """Wait for the device's queued work (nothing to wait for on cpu): timings read after it."""
    import torch

    return getattr(torch, device).synchronize if device != "cpu" else (lambda: None)


def resolve_device(name: str) -> str:
    """`auto` picks npu > cuda > cpu; a named device must be present, or it is bad input."""
    if name == "auto":
        return next(d for d in DEVICES if unavailable_reason(d) is None)
    reason = unavailable_reason(name)
    if reason is not None:
        raise UsageError(f"{reason}; use --device cpu or --device auto")
    return name


# A rank is a whole torch process that traces, exports and compiles the step: rough peak
# memory of one: `aclcap capture examples/tiny_llama.py --device cpu --shapes 1,2` (one
# process doing a rank's work) peaked at 0.46 GiB resident; twice that leaves room for a
# larger model and an uncached compile.
RANK_BYTES = 2**30


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (what can be had without swapping); None off Linux."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_nproc(nproc: int, device: str, oversubscribe: bool = False) -> None:
    """Refuse --nproc that cannot work, before any rank starts: more ranks than devices
    (one device each), more than the cores on cpu unless `oversubscribe`, or more than the
    memory holds at a rough RANK_BYTES each."""
    if device in ("cuda", "npu"):
        import torch

        count = getattr(torch, device).device_count()
        if nproc > count:
            raise UsageError(f"--nproc {nproc}: {count} {device} device(s) here, one per rank; "
                             f"give --nproc {count} or fewer")
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else os.cpu_count() or 1
        if nproc > cores and not oversubscribe:
            raise UsageError(f"--nproc {nproc}: {cores} cpu core(s) here; give --nproc {cores} "
                             "or fewer, or --oversubscribe to run more ranks than cores")
    available = available_memory_bytes()
    if available is not None and nproc * RANK_BYTES > available:
        raise UsageError(f"--nproc {nproc}: about {nproc * RANK_BYTES / 2**30:.0f} GiB needed "
                         f"({RANK_BYTES / 2**30:.0f} GiB a rank), {available / 2**30:.1f} GiB "
                         f"available; give --nproc {max(1, available // RANK_BYTES)} or fewer")
