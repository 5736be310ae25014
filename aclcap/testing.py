"""`aclcap.testing.check_op(op, samples)`: check-meta's battery for one op, in the calling
process, as an assertion: a drop-in for the `opcheck` helper op projects write in their
test suites, covering more (mutations both ways, dynamic-shape specialization, fake vs real
strides, torch.compile fullgraph)."""

from __future__ import annotations

from collections.abc import Iterable

from aclcap._compat import OpOverload, OpOverloadPacket
from aclcap.meta import checks as meta_checks
from aclcap.meta.sample_inputs import SampleInput
from aclcap.status import Severity


def check_op(op: str | OpOverload | OpOverloadPacket, samples: Iterable[SampleInput],
             checks: Iterable[str] = meta_checks.DEFAULT_CHECKS, *,
             strict: bool = False) -> None:
    """Run the checks on `samples` (aclcap.SampleInput) of `op` (`ns::name.overload`,
    `ns::name` for the default overload, or the OpOverload); raise AssertionError naming the
    op and every reason if any check fails, or if no sample was given (a check of nothing
    must not pass). Kernels run here: a segfault ends the process (the pytest plugin runs
    them in a worker instead)."""
    if isinstance(op, OpOverloadPacket):  # torch.ops.ns.op: which overload is not said
        overloads = ", ".join(f"torch.ops.{op._qualified_op_name.replace('::', '.')}.{o}"
                              for o in op.overloads())
        raise TypeError(f"check_op({op._qualified_op_name}): pass one overload, not the "
                        f"packet: {overloads} (or the name as a string)")
    samples = list(samples)
    if not samples:
        raise AssertionError(f"{op}: no samples given, nothing was checked: pass "
                             "aclcap.SampleInput calls of the op")
    outcome = meta_checks.check_op(op, samples, checks, strict=strict)
    errors = [f.message for f in outcome.findings if f.severity is Severity.ERROR]
    if errors:
        raise AssertionError(f"{op}: " + "; ".join(errors))
