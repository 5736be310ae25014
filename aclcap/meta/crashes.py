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
    name = schema_name.split("::", 1)[1]
    fix = ("keep data reads out of it (in the backend kernel, below Autograd) and give each "
           "op it calls a Meta kernel or register_fake") if kind == MetaKind.AUTOGRAD_CPP else (
        f"register it for its backend key (m.impl(\"{name}\", torch::kCPU, &fn)) and give it "
        "a Meta kernel or register_fake")
    return f"{where} fails on fake tensors, as torch.compile runs it: {error}; {fix}"


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
