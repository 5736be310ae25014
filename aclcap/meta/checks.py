"""The checks check-meta runs on one op overload with its samples, in the worker process
(real kernels may crash): opcheck, fake-vs-real output metadata, the meta device, the
mutations the kernel really makes against the schema's `!` marks, and fullgraph tracing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
)
from torch.utils._pytree import tree_flatten, tree_map_only

from aclcap._tensors import clone_tensors
from aclcap.errors import first_line
from aclcap.meta.fakecheck import fake_mismatches
from aclcap.meta.registry import resolve_overload
from aclcap.meta.sample_inputs import SampleInput
from aclcap.status import Finding, Severity, Status

# opcheck's tests; test_autograd_registration only runs when an input requires grad.
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")


@dataclass
class CheckOutcome:
    """What the checks found over all samples of one op."""

    findings: list[Finding] = field(default_factory=list)
    sample_count: int = 0
    _seen: set[str] = field(default_factory=set)

    @property
    def status(self) -> Status:
        failed = any(f.severity is Severity.ERROR for f in self.findings)
        return Status.FAIL if failed else Status.PASS

    def fail(self, reason: str, key: str | None = None) -> None:
        """Keep the first reason per check (`key`): one sample tells the story."""
        self._add(Finding(reason), key)

    def warn(self, reason: str) -> None:
        self._add(Finding(reason, Severity.WARNING), None)

    def _add(self, finding: Finding, key: str | None) -> None:
        if (key or finding.message) not in self._seen:
            self._seen.add(key or finding.message)
            self.findings.append(finding)


def _bind(op: torch._ops.OpOverload, sample: SampleInput) -> list[tuple[Any, Any]]:
    """(schema argument, value) pairs, positional and keyword alike."""
    bound = []
    for i, arg in enumerate(op._schema.arguments):
        if i < len(sample.args):
            bound.append((arg, sample.args[i]))
        elif arg.name in sample.kwargs:
            bound.append((arg, sample.kwargs[arg.name]))
    return bound


def _named_tensors(arg: Any, value: Any) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield arg.name, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, torch.Tensor):
                yield f"{arg.name}[{i}]", v


def _changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    differs = before != after
    if before.is_floating_point():
        differs &= ~(before.isnan() & after.isnan())
    return bool(differs.any())


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    tol = 1e-5 if a.dtype == torch.float32 else 2e-2
    return torch.allclose(a.float(), b.float(), atol=tol, rtol=tol, equal_nan=True)


class _OpChecker:
    def __init__(self, op: torch._ops.OpOverload, meta_kind: str, strict: bool,
                 meta_source: str = "") -> None:
        self.op = op
        self.meta_kind = meta_kind
        self.meta_source = meta_source
        self.strict = strict
        self.out = CheckOutcome()
        self.written: set[str] = set()
        self.marked = {a.name for a in op._schema.arguments
                       if a.alias_info is not None and a.alias_info.is_write}

    def run_sample(self, sample: SampleInput) -> Any:
        """Real kernel on copies; returns the outputs and records what it wrote."""
        args, kwargs = clone_tensors((sample.args, sample.kwargs))
        before = {name: t.clone() for arg, v in _bind(self.op, SampleInput(args, kwargs))
                  for name, t in _named_tensors(arg, v)}
        real = self.op(*args, **kwargs)
        for arg, value in _bind(self.op, SampleInput(args, kwargs)):
            for name, t in _named_tensors(arg, value):
                if _changed(before[name], t):
                    self.written.add(arg.name)
                    if arg.name not in self.marked:
                        self.out.fail(f"writes `{name}` but the schema does not mark it "
                                      f"mutable (`Tensor(a!) {arg.name}`)", key=name)
        return real, (args, kwargs)

    def check_fake(self, sample: SampleInput, real: Any) -> None:
        for reason in fake_mismatches(self.op, sample.args, sample.kwargs, real):
            if self.meta_kind == "composite_cpp" and reason.startswith("fake impl raised"):
                reason = self._composite_reason(reason.removeprefix("fake impl raised "))
            self.out.fail(reason, key="fake:" + reason.split(":")[0])

    def _composite_reason(self, error: str) -> str:
        """A C++ composite that fails on fake tensors: where it is, what broke, the fix."""
        where = self.meta_source.split("): ", 1)[0] + ")"
        name = self.op._schema.name.split("::", 1)[1]
        return (f"{where} fails on fake tensors, as torch.compile runs it: {error}; register "
                f"it for its backend key (m.impl(\"{name}\", torch::kCPU, &fn)) and give it a "
                "Meta kernel or register_fake")

    def check_meta_device(self, sample: SampleInput) -> None:
        try:
            args, kwargs = tree_map_only(torch.Tensor, lambda t: t.to("meta"),
                                         (sample.args, sample.kwargs))
            self.op(*args, **kwargs)
        except Exception as exc:
            if self.meta_kind == "trivial":  # traces in torch.compile (its fake is generated)
                self.out.warn("traces only through torch's generated fake and fails on the "
                              "meta device: register a fake returning None")
            else:
                self.out.fail(f"fails on the meta device: {first_line(exc)}", key="meta")

    def check_dynamic(self, sample: SampleInput) -> None:
        """Run the meta impl with every dim symbolic; a dim it turns into a constant is a
        meta that breaks dynamic shapes (what vllm-ascend's size() -> sym_size() fixed)."""
        shape_env = ShapeEnv()
        try:
            with FakeTensorMode(shape_env=shape_env) as mode:
                def symbolic(t: torch.Tensor) -> torch.Tensor:
                    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * t.dim())
                    return mode.from_tensor(t, symbolic_context=ctx)

                fake = SampleInput(*tree_map_only(torch.Tensor, symbolic,
                                                  (sample.args, sample.kwargs)))
                self.op(*fake.args, **fake.kwargs)
        except Exception as exc:
            self.out.fail(f"meta impl fails with symbolic sizes: {first_line(exc)}",
                          key="dynamic")
            return
        for arg, value in _bind(self.op, fake):
            for name, t in _named_tensors(arg, value):
                for dim, size in enumerate(t.shape):
                    # Sizes 0 and 1 are specialized by torch itself when the fake is made.
                    if isinstance(size, torch.SymInt) and size.node.hint not in (0, 1) \
                            and shape_env.simplify(size.node.expr).is_number:
                        self.out.fail(
                            f"meta of `{self.op._schema.name}` specializes dim {dim} of "
                            f"`{name}` to {size.node.hint}: use sym_size()/sym_numel() and "
                            "keep sizes symbolic", key=f"dynamic:{name}:{dim}")

    def check_opcheck(self, sample: SampleInput) -> None:
        args, kwargs = clone_tensors((sample.args, sample.kwargs))
        results = torch.library.opcheck(self.op, args, kwargs, test_utils=OPCHECK_TESTS,
                                        raise_exception=False)
        for test, result in results.items():
            if isinstance(result, BaseException):
                self.out.fail(f"opcheck {test}: {first_line(result)}", key=test)

    def check_trace(self, samples: list[tuple[SampleInput, Any]]) -> None:
        torch._dynamo.reset()
        compiled = torch.compile(lambda *a, **k: self.op(*a, **k), fullgraph=True,
                                 dynamic=True, backend="aot_eager")
        for sample, (real, real_inputs) in samples:
            args, kwargs = clone_tensors((sample.args, sample.kwargs))
            try:
                got = compiled(*args, **kwargs)
            except Exception as exc:
                self.out.fail(f"torch.compile(fullgraph=True, dynamic=True) fails: "
                              f"{first_line(exc)}")
                return
            pairs = list(zip(tree_flatten((got, args, kwargs))[0],
                             tree_flatten((real, *real_inputs))[0], strict=False))
            for i, (g, r) in enumerate(pairs):
                if isinstance(r, torch.Tensor) and not _close(g, r):
                    self.out.fail(f"torch.compile result {i} (outputs, then inputs) differs "
                                  "from eager")
                    return

    def finish(self) -> CheckOutcome:
        for name in sorted(self.marked - self.written):
            reason = (f"marks `{name}` mutable but never writes it (over any sample): "
                      "drop the `!` or functionalization copies it for nothing")
            self.out.fail(reason) if self.strict else self.out.warn(reason)
        return self.out


def check_op(qualname: str, meta_kind: str, samples: Iterable[SampleInput],
             strict: bool = False, meta_source: str = "") -> CheckOutcome:
    """Run every check over every sample of `qualname`; reasons name argument or output."""
    op = resolve_overload(qualname)
    checker = _OpChecker(op, meta_kind, strict, meta_source)
    traced: list[tuple[SampleInput, Any]] = []
    for sample in samples:
        checker.out.sample_count += 1
        real, real_inputs = checker.run_sample(sample)
        checker.check_fake(sample, real)
        checker.check_meta_device(sample)
        checker.check_dynamic(sample)
        checker.check_opcheck(sample)
        traced.append((sample, (real, real_inputs)))
    checker.check_trace(traced)
    return checker.finish()
