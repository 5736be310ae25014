"""Which backends this machine has, and why the others are absent (never faked)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import torch

from aclcap.errors import UsageError

DEVICES = ("npu", "cuda", "cpu")


def unavailable_reason(device: str) -> str | None:
    """None when `device` can run here, else a one-line reason naming what is missing."""
    if device == "cpu":
        return None
    if device == "cuda":
        if torch.version.cuda is None:
            return f"cuda: torch {torch.__version__} is a CPU-only build"
        if not torch.cuda.is_available():
            return "cuda: no GPU found (torch.cuda.is_available() is False)"
        return None
    if device == "npu":
        if importlib.util.find_spec("torch_npu") is None:
            return "npu: torch_npu not installed (pip install 'aclcap[npu]')"
        try:
            import torch_npu  # noqa: F401
        except ImportError as exc:
            return f"npu: CANN not found ({exc})"
        if not torch.npu.is_available():
            return "npu: no Ascend device found (torch.npu.is_available() is False)"
        return None
    raise UsageError(f"unknown device {device!r}: choose one of auto, {', '.join(DEVICES)}")


def synchronizer(device: str) -> Callable[[], None]:
    """Wait for the device's queued work (nothing to wait for on cpu): timings read after it."""
    return getattr(torch, device).synchronize if device != "cpu" else (lambda: None)


def resolve_device(name: str) -> str:
    """`auto` picks npu > cuda > cpu; a named device must be present, or it is bad input."""
    if name == "auto":
        return next(d for d in DEVICES if unavailable_reason(d) is None)
    reason = unavailable_reason(name)
    if reason is not None:
        raise UsageError(f"{reason}; use --device cpu or --device auto")
    return name
