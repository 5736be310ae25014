"""What differs between the torch releases aclcap supports (2.11 to 2.15, "Tested with" in
docs/devices.md), in one place: each shim takes the newer API where this torch has it and
names what stands in where it does not. Everything else aclcap calls is the same on all five
(read in their sources and run by scripts/compat_check.sh)."""

from __future__ import annotations

from typing import Any

import torch


def accelerator_graph() -> Any:
    """torch.accelerator.Graph, the device-generic graph (torch 2.13 on; torch_npu registers
    its NPU graph behind it), or None on torch 2.11 and 2.12: there the device module's own
    class (torch.cuda.CUDAGraph, torch.npu.NPUGraph) captures, with the same capture_begin,
    capture_end, replay and pool."""
    return getattr(getattr(torch, "accelerator", None), "Graph", None)
