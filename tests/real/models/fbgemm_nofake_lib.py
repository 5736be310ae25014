"""FBGEMM_GPU-CPU's sparse and quantize ops (the pinned release of the `real` extra)
re-defined in namespace `fbgemm_nofake` WITHOUT their metas: fbgemm's own schemas, read from
its registered ops, each CPU kernel calling fbgemm's. `check-meta --synthesize` infers a
fake for each from the kernel alone; fbgemm's own metas (its ops under fake tensors) are
the answer key (fbgemm_fake_compare.py). Samples come from the recommendation step beside
this file (fbgemm_recsys_step.py), as a user's harvest would."""

from __future__ import annotations

from collections.abc import Callable

import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm and its CPU kernels)
import torch

NS = "fbgemm_nofake"
NAMES = ["asynchronous_complete_cumsum", "asynchronous_exclusive_cumsum",
         "FloatToFused8BitRowwiseQuantized", "Fused8BitRowwiseQuantizedToFloat",
         "FloatToFusedNBitRowwiseQuantizedSBHalf", "FusedNBitRowwiseQuantizedSBHalfToFloat",
         "jagged_2d_to_dense", "pack_segments", "segment_sum_csr", "offsets_range",
         "batched_dense_vec_jagged_2d_mul", "permute_1D_sparse_data",
         "expand_into_jagged_permute"]
_lib = torch.library.Library(NS, "DEF")


def _forward(op: torch._ops.OpOverload) -> Callable:
    """The CPU kernel: fbgemm's own op, as fbgemm dispatches it."""
    return lambda *args, **kwargs: op(*args, **kwargs)


for _name in NAMES:
    _op = getattr(torch.ops.fbgemm, _name).default
    _lib.define(str(_op._schema).split("::", 1)[1])  # no alias sets: the text parses back
    _lib.impl(_name, _forward(_op), "CPU")
