"""The bundled op library, namespace `aclcap` (`torch.ops.aclcap.<name>`).

`load()` builds the C++ kernels if they are stale, loads them, and registers the Python
fake impls, the sample inputs and (where a GPU or NPU is present) the device fallbacks;
`load(metas=False)` (the module `aclcap_ops.nometa`) the same without any meta impl.
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
    "paged_attention",
)

_loaded: bool | None = None  # None until load(); then whether the meta impls were loaded


def load(metas: bool | None = None) -> None:
    """Build if stale, load the kernels and register everything; a no-op the second time.
    `metas=False` loads a build without the C++ Meta kernels and skips meta.py: the library
    as one that ships no meta impls (`--lib aclcap_ops.nometa`), which synthesis regenerates.
    A process holds one or the other (both register the same `aclcap` ops): `load()` with no
    argument takes whichever is loaded, so a model file's own `aclcap_ops.load()` runs on the
    library without metas once aclcap_ops.nometa came first; asking for the other is an error."""
    global _loaded
    if _loaded is not None:
        if metas is not None and _loaded != metas:
            from aclcap.errors import UsageError

            raise UsageError(
                f"the bundled library is already loaded {'with' if _loaded else 'without'} its "
                "meta impls in this process: pass either aclcap_ops or aclcap_ops.nometa")
        return
    metas = True if metas is None else metas
    import torch

    from aclcap.build import DEFAULT_CPU, NO_META_CPU, ensure_cpu_library

    torch.ops.load_library(str(ensure_cpu_library(variant=DEFAULT_CPU if metas else NO_META_CPU)))
    from aclcap_ops import device_fallback, samples  # noqa: F401  (registrations)

    if metas:
        from aclcap_ops import meta  # noqa: F401  (the Python fakes)
    device_fallback.register()
    _loaded = metas
