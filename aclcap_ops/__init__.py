"""The bundled op library, namespace `aclcap` (`torch.ops.aclcap.<name>`).

`load()` builds the C++ kernels if they are stale, loads them, and registers the Python
fake impls, the sample inputs and (where a GPU or NPU is present) the device fallbacks.
Importing the package does none of that, so `aclcap build` and tools that only need the op
list stay cheap. `--lib aclcap_ops` calls `load()`.
"""

from __future__ import annotations

# The op list, in one place: the device fallback, the microbenchmark and the tests read it.
OPS = (
    "rms_norm",
    "fused_add_rms_norm",
    "rotary_embedding",
    "silu_and_mul",
    "get_masked_input_and_mask",
    "reshape_and_cache",
)

_loaded = False


def load() -> None:
    """Build if stale, load the kernels and register everything; a no-op the second time."""
    global _loaded
    if _loaded:
        return
    import torch

    from aclcap.build import ensure_cpu_library

    torch.ops.load_library(str(ensure_cpu_library()))
    from aclcap_ops import device_fallback, meta, samples  # noqa: F401  (registrations)

    device_fallback.register()
    _loaded = True
