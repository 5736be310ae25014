"""Which check a worker crash happened in, and what it means: a C++ composite's (or C++
Autograd kernel's) body that crashes on fake tensors is a defect of its registration (fail,
with the fix), a kernel that crashes on real inputs is a crash of the kernel itself."""

from __future__ import annotations

from aclcap.meta.registry import MetaKind
from aclcap.status import Finding, Status

KERNEL_STEP = "kernel"  # the real kernel on the samples, before any check
# The checks that run the op on fake or meta tensors (a C++ composite runs its body there);
# `writes` and `unused_marks` only read the kernel's real calls.
FAKE_CHECKS = frozenset({"fake_vs_real", "meta_device", "dynamic_shapes", "opcheck",
                         "opcheck_no_aot", "fullgraph_compile"})


# Meta kinds whose C++ body tracing runs on fake tensors: a failure there is the body's.
CPP_BODIES = frozenset({MetaKind.COMPOSITE_CPP, MetaKind.AUTOGRAD_CPP})


def composite_reason(schema_name: str, meta_source: str, error: str,
                     kind: MetaKind = MetaKind.COMPOSITE_CPP) -> str:
    """A C++ composite or Autograd kernel that fails on fake tensors: where it is, what
    broke, the fix."""
    where = meta_source.split("): ", 1)[0] + ")"
    fix = ("keep data reads out of it (in the backend kernel, below Autograd) and give each "
           "op it calls a Meta kernel or register_fake") if kind == MetaKind.AUTOGRAD_CPP else \
        composite_fix(schema_name)
    return f"{where} fails on fake tensors, as torch.compile runs it: {error}; {fix}"


def composite_fix(schema_name: str) -> str:
    """What makes a C++ composite traceable: a wrapper that needs no rebuild, and what its
    library's authors change. Registering the body on a backend key alone would drop the
    autograd a composite gets for free, so the fix names where that goes."""
    ns, name = schema_name.split("::", 1)
    return (f"without rebuilding the library, call it from a torch.library.custom_op whose "
            f"body calls torch.ops.{ns}.{name} and register the fake on that wrapper; in the "
            "library, define it with TORCH_LIBRARY (alias annotations on what it writes or "
            f"returns), register the forward on its backend keys (m.impl(\"{name}\", "
            "torch::kCPU, &fn)), its autograd Function on the Autograd key, and a Meta kernel")


def crash_outcome(qualname: str, meta_kind: MetaKind, meta_source: str, check: str | None,
                  death: str) -> tuple[Status, list[Finding]]:
    """The row of an op whose worker died during `check` (None: before any was announced)."""
    if check in FAKE_CHECKS and meta_kind in CPP_BODIES:
        signal = death.removeprefix("crashed (").split(")", 1)[0]
        signal = signal.split(": ", 1)[-1] if signal.startswith("signal") else signal
        return Status.FAIL, [Finding(composite_reason(
            qualname.split(".", 1)[0], meta_source,
            f"its C++ body crashed ({signal}) on fake tensors (check {check})", meta_kind))]
    if check is None:
        return Status.CRASHED, [Finding(death)]
    where = "while the kernel ran on real inputs" if check == KERNEL_STEP else \
        f"in check {check}"
    return Status.CRASHED, [Finding(f"{death} {where}")]
