"""On a GPU or NPU, serve the bundled ops through their plain-PyTorch references.

The bundled library has hand-written CPU kernels only. So that `aclcap capture` and
`aclcap bench` run the same models on CUDA graphs and aclgraph, the references (composites
of torch's own device kernels, which capture fine) are registered for the device's dispatch
key, and only where that device is present: check-meta's kernel column stays truthful.
"""

from __future__ import annotations

import torch

from aclcap_ops import OPS, reference


def present_device_keys() -> list[str]:
    keys = []
    if torch.cuda.is_available():
        keys.append("CUDA")
    npu = getattr(torch, "npu", None)  # exists once torch_npu is imported
    if npu is not None and npu.is_available():
        keys.append("PrivateUse1")
    return keys


def register() -> list[str]:
    """Register the references for each present device; returns the dispatch keys used."""
    keys = present_device_keys()
    for key in keys:
        for name in OPS:
            torch.library.impl(f"aclcap::{name}", key)(getattr(reference, name))
    return keys
