"""The checks check-meta runs on one op overload with its samples, in the worker process
(real kernels may crash), kept in a registry with one signature as torch's optests keeps
its tests: the writes the kernel really makes against the schema's `!` marks, fake-vs-real
output metadata, the meta device, dynamic shapes, opcheck, fullgraph tracing, and `!` marks
no sample wrote. `check_op` runs a chosen subset (meta synthesis verifies its fakes so)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
)

from aclcap._compat import (
    OpOverload,
    fake_tensor_mode,
    fx_config,
    reset_dynamo,
    tree_flatten,
    tree_map_only,
)
from aclcap.errors import first_line
from aclcap.meta.crashes import CPP_BODIES, KERNEL_STEP, composite_reason
from aclcap.meta.fakecheck import compare_fake, data_dependent_dims, run_fake
from aclcap.meta.guarded import exact_copies
from aclcap.meta.observe import RecordedCall, bind, named_tensors, observe
from aclcap.meta.registry import MetaKind, generated_fake, meta_impl, resolve_overload
from aclcap.meta.sample_inputs import SampleInput
from aclcap.meta.variations import new_sizes, vary_dim
from aclcap.status import Finding, Severity, Status

# opcheck's tests; test_autograd_registration only runs when an input requires grad.
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")
_OUTPUTS_DIFFER = "Outputs of the operator are different in eager-mode"  # opcheck's words


@dataclass
class CheckOutcome:
    """What the checks found over all samples of one op."""

    findings: list[Finding] = field(default_factory=list)
    sample_count: int = 0
    data_dependent: bool = False  # an output size follows the values (counted apart)
    _seen: set[str] = field(default_factory=set)

    @property
    def status(self) -> Status:
        failed = any(f.severity is Severity.ERROR for f in self.findings)
        return Status.FAIL if failed else Status.PASS

    def fail(self, reason: str, key: str | None = None) -> None:
        """Keep the first reason per check (`key`): one sample tells the story."""
        self._add(Finding(reason), key)

    def warn(self, reason: str, key: str | None = None) -> None:
        self._add(Finding(reason, Severity.WARNING), key)

    def note(self, reason: str, key: str | None = None) -> None:
        self._add(Finding(reason, Severity.NOTE), key)

    def has(self, key: str) -> bool:
        """A finding under `key` is already kept."""
        return key in self._seen

    def _add(self, finding: Finding, key: str | None) -> None:
        if (key or finding.message) not in self._seen:
            self._seen.add(key or finding.message)
            self.findings.append(finding)


@dataclass
class OpCheck:
    """What every check reads (the op, its meta impl, --strict) and where it writes."""

    op: OpOverload
    meta_kind: MetaKind
    meta_source: str = ""
    strict: bool = False
    out: CheckOutcome = field(default_factory=CheckOutcome)

    @property
    def marked(self) -> set[str]:
        """Arguments the schema marks written (`Tensor(a!)`)."""
        return {a.name for a in self.op._schema.arguments
                if a.alias_info is not None and a.alias_info.is_write}


# A check sees every real call of the op (each sample, run once on copies) and records
# findings on `check.out`.
Check = Callable[[OpCheck, list[RecordedCall]], None]


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    tol = 1e-5 if a.dtype == torch.float32 else 2e-2
    return torch.allclose(a.float(), b.float(), atol=tol, rtol=tol, equal_nan=True)


def check_writes(check: OpCheck, runs: list[RecordedCall]) -> None:
    """An argument the kernel writes (byte for byte) that the schema leaves unmarked."""
    for run in runs:
        for name in run.call.written:
            if name not in check.marked:
                check.out.fail(f"writes `{name}` but the schema does not mark it mutable "
                               f"(`Tensor(a!) {name}`)", key=name)


def _composite_reason(check: OpCheck, error: str) -> str:
    return composite_reason(check.op._schema.name, check.meta_source, error, check.meta_kind)


def _data_dependent(check: OpCheck, dims: list[str]) -> None:
    check.out.data_dependent = True
    check.out.note(f"data-dependent output size ({', '.join(dims)}): torch.compile breaks "
                   "the graph here or needs `capture_dynamic_output_shape_ops`; a device graph "
                   "cannot hold it, so it runs eagerly between graphs", key="data-dependent")


def check_fake(check: OpCheck, runs: list[RecordedCall]) -> None:
    """The fake's outputs against the kernel's: shape, dtype, strides, storage offset; a
    data-dependent output dim bound to the size the kernel gave."""
    for run in runs:
        compared = compare_fake(check.op, run.sample.args, run.sample.kwargs, run.outputs)
        if compared.data_dependent:
            _data_dependent(check, compared.data_dependent)
        for reason in compared.reasons:
            if check.meta_kind in CPP_BODIES and reason.startswith("fake impl raised"):
                reason = _composite_reason(check, reason.removeprefix("fake impl raised "))
            check.out.fail(reason, key="fake:" + reason.split(":")[0])


def _fake_data_dependent(check: OpCheck, run: RecordedCall) -> list[str]:
    """The fake's data-dependent output dims for this call ([] if it has none or fails)."""
    try:
        return data_dependent_dims(run_fake(check.op, run.sample.args, run.sample.kwargs)[0])
    except Exception:  # the fake's own failure is check_fake's to report
        return []


def check_meta_device(check: OpCheck, runs: list[RecordedCall]) -> None:
    """The meta impl on meta tensors. Not held against a data-dependent output: torch
    refuses meta tensors for those by design (only fake tensors carry unbacked sizes)."""
    for run in runs:
        try:
            args, kwargs = tree_map_only(torch.Tensor, lambda t: t.to("meta"),
                                         (run.sample.args, run.sample.kwargs))
            check.op(*args, **kwargs)
        except Exception as exc:
            dims = _fake_data_dependent(check, run)
            if dims:
                _data_dependent(check, dims)
            elif check.meta_kind == MetaKind.TRIVIAL and (tagged := generated_fake(check.op)):
                # a note: any meta of one's own would replace torch's fake for tracing too
                check.out.note(f"traces through torch's generated fake ({tagged}); on the "
                               "meta device it fails, torch generates no Meta kernel",
                               key="meta")
            elif check.meta_kind == MetaKind.TRIVIAL:  # traces in torch.compile (generated fake)
                check.out.warn("traces only through torch's generated fake and fails on the "
                               "meta device: register a fake returning None")
            else:
                check.out.fail(f"fails on the meta device: {first_line(exc)}", key="meta")


def check_dynamic(check: OpCheck, runs: list[RecordedCall]) -> None:
    """Run the meta impl with every dim symbolic; a dim it turns into a constant is a
    meta that breaks dynamic shapes (what vllm-ascend's size() -> sym_size() fixed)."""
    for run in runs:
        shape_env = ShapeEnv()
        try:
            with fake_tensor_mode(shape_env=shape_env) as mode:
                def symbolic(t: torch.Tensor, mode: Any = mode) -> torch.Tensor:
                    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * t.dim())
                    return mode.from_tensor(t, symbolic_context=ctx)

                fake = SampleInput(*tree_map_only(torch.Tensor, symbolic,
                                                  (run.sample.args, run.sample.kwargs)))
                check.op(*fake.args, **fake.kwargs)
        except Exception as exc:
            check.out.fail(f"meta impl fails with symbolic sizes: {first_line(exc)}",
                           key="dynamic")
            continue
        for arg_name, t in named_tensors(bind(check.op, fake.args, fake.kwargs), indexed=True):
            for dim, size in enumerate(t.shape):
                key = f"dynamic:{arg_name}:{dim}"
                # Sizes 0 and 1 are specialized by torch itself when the fake is made.
                if isinstance(size, torch.SymInt) and size.node.hint not in (0, 1) \
                        and shape_env.simplify(size.node.expr).is_number \
                        and not check.out.has(key):
                    _judge_pinned(check, run, arg_name, dim, size.node.hint, key)


def _judge_pinned(check: OpCheck, run: RecordedCall, arg: str, dim: int, size: int,
                  key: str) -> None:
    """A dim the meta pins: fixed by the op's contract if the real kernel rejects every
    other size (the same dim of the inputs sharing it varied with it), else a defect
    naming the size the kernel accepted; a warning where the fake rejects that size too."""
    name = check.op._schema.name
    accepted, probed = None, 0
    # A Tensor[] element has no argument of its own to vary; a call that reads state sized
    # for it (vLLM's forward context) is never run at another size.
    if "[" not in arg and run.sample.setup is None:
        for new_size in new_sizes(size):
            varied = vary_dim(check.op, run.sample, arg, dim, new_size)
            if varied is None:
                continue
            probed += 1
            args, kwargs = exact_copies((varied.args, varied.kwargs))
            try:
                check.op(*args, **kwargs)
            except Exception:  # rejected: what the contract says
                continue
            accepted = new_size
            break
    if probed and accepted is None:
        check.out.note(f"dim {dim} of `{arg}` is {size} by contract: the kernel rejects "
                       "other sizes", key=key)
        return
    if accepted is not None and (refusal := _fake_refusal(check, varied)):
        # A torch._check of the op's contract that the kernel does not enforce (bnb's
        # 256-entry code table): no specialization, a meta stricter than the kernel.
        reason = (f"meta of `{name}` rejects size {accepted} of dim {dim} of `{arg}`, "
                  f"which the kernel accepts: {refusal}")
        check.out.fail(reason, key=key) if check.strict else check.out.warn(reason, key=key)
        return
    but = f", but the kernel accepts size {accepted}" if accepted is not None else ""
    check.out.fail(f"meta of `{name}` specializes dim {dim} of `{arg}` to {size}{but}: use "
                   "sym_size()/sym_numel() and keep sizes symbolic", key=key)


def _fake_refusal(check: OpCheck, sample: SampleInput) -> str | None:
    """Why the fake raises on this call at static sizes, or None if it runs."""
    try:
        run_fake(check.op, sample.args, sample.kwargs)
    except Exception as exc:
        return first_line(exc)
    return None


def dynamic_signature(sample: SampleInput) -> tuple:
    """What decides whether torch.compile(dynamic=True) can reuse one graph for two samples:
    each tensor's dtype, rank, device and requires_grad, and every non-tensor value but a
    size-like int (dynamic too). Sizes are not in it: size-oblivious compiles (see
    check_compile) share one graph between size 1 and size 33."""
    leaves = tree_flatten((sample.args, sample.kwargs))[0]
    return tuple((x.dtype, x.dim(), x.device.type, x.requires_grad)
                 if isinstance(x, torch.Tensor) else
                 "int" if type(x) is int else repr(x) for x in leaves)


def _generality(run: RecordedCall) -> int:
    """How many tensor dims of a call are 0 or 1 (sizes torch specializes): fewer is more
    general, the better representative of its op."""
    return sum(1 for x in tree_flatten((run.sample.args, run.sample.kwargs))[0]
               if isinstance(x, torch.Tensor) for size in x.shape if size in (0, 1))


def representatives(runs: list[RecordedCall]) -> list[RecordedCall]:
    """The calls ordered so each dynamic signature's most general call comes first, in the
    order the signatures first appear: the first call of a signature compiles its graph."""
    groups: dict[tuple, list[RecordedCall]] = {}
    for run in runs:
        groups.setdefault(dynamic_signature(run.sample), []).append(run)
    return [run for group in groups.values()
            for run in sorted(group, key=_generality)]  # stable: ties keep sample order


def _has_nan(value: Any) -> bool:
    return any(t.is_floating_point() and bool(t.isnan().any())
               for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor))


def _opcheck(check: OpCheck, runs: list[RecordedCall], tests: tuple[str, ...]) -> None:
    """opcheck's tests on every call but test_aot_dispatch_dynamic, which traces the op
    through AOTAutograd with every size symbolic (most of opcheck's time) and so gains
    nothing from a second size: it runs on the op's most general call only, one whose
    outputs hold no NaN where there is such a call. That test compares the outputs with
    assert_close, where NaN differs from NaN: fbgemm's n-bit dequantize on bytes whose
    half-float scale reads as NaN failed it whatever its fake."""
    ordered = representatives(runs)
    aot = next((i for i, run in enumerate(ordered) if not _has_nan(run.outputs)), 0)
    for i, run in enumerate(ordered):
        args, kwargs = exact_copies((run.sample.args, run.sample.kwargs))
        run.sample.enter()
        run_tests = tests if i == aot else tuple(t for t in tests
                                                 if t != "test_aot_dispatch_dynamic")
        results = torch.library.opcheck(check.op, args, kwargs, test_utils=run_tests,
                                        raise_exception=False)
        for test, result in results.items():
            if isinstance(result, BaseException) and not (
                    _has_nan(run.outputs) and _OUTPUTS_DIFFER in str(result)):
                check.out.fail(f"opcheck {test}: {first_line(result)}", key=test)


def check_opcheck(check: OpCheck, runs: list[RecordedCall]) -> None:
    _opcheck(check, runs, OPCHECK_TESTS)


def check_opcheck_no_aot(check: OpCheck, runs: list[RecordedCall]) -> None:
    """opcheck without test_aot_dispatch_dynamic, for an op whose schema returns an alias:
    torch cannot functionalize it, whatever its meta (meta synthesis verifies such ops)."""
    _opcheck(check, runs, tuple(t for t in OPCHECK_TESTS if t != "test_aot_dispatch_dynamic"))


def check_compile(check: OpCheck, runs: list[RecordedCall]) -> None:
    """torch.compile(fullgraph=True, dynamic=True) of the op alone, against eager: outputs,
    then the inputs as each left them. One graph per dynamic signature, not per sample: the
    most general call compiles it size-oblivious (no 0/1 specialization), the others reuse
    it. What fails to compile size-oblivious (Dynamo refuses an `out=` it cannot prove
    contiguous) is compiled again as torch.compile does by default before it is reported.
    A call whose `out=` tensor is not contiguous is left out: Dynamo refuses it whatever
    the meta ("Attempted to call op with non-contiguous `out=` tensor")."""
    ordered = [r for r in representatives(runs) if not _strided_out(check.op, r)]
    with fx_config().patch(backed_size_oblivious=True):
        failure = _compile_and_compare(check.op, ordered)
    if failure and failure.startswith("torch.compile("):  # not compiled, not a wrong result
        failure = _compile_and_compare(check.op, ordered)
    if failure:
        check.out.fail(failure)


def _strided_out(op: OpOverload, run: RecordedCall) -> bool:
    return any(arg.is_out and isinstance(value, torch.Tensor) and not value.is_contiguous()
               for arg, value in bind(op, run.sample.args, run.sample.kwargs))


def _compile_and_compare(op: OpOverload, runs: list[RecordedCall]) -> str | None:
    """The first failure over the calls, or None."""
    reset_dynamo()
    compiled = torch.compile(lambda *a, **k: op(*a, **k), fullgraph=True, dynamic=True,
                             backend="aot_eager")
    for run in runs:
        args, kwargs = exact_copies((run.sample.args, run.sample.kwargs))
        run.sample.enter()
        try:
            got = compiled(*args, **kwargs)
        except Exception as exc:
            return f"torch.compile(fullgraph=True, dynamic=True) fails: {first_line(exc)}"
        after = run.after or run.sample
        pairs = list(zip(tree_flatten((got, args, kwargs))[0],
                         tree_flatten((run.outputs, after.args, after.kwargs))[0],
                         strict=False))
        for i, (g, r) in enumerate(pairs):
            if isinstance(r, torch.Tensor) and not _close(g, r) and \
                    not _eager_varies(op, run, i):
                return f"torch.compile result {i} (outputs, then inputs) differs from eager"
    return None


def _eager_varies(op: OpOverload, run: RecordedCall, index: int) -> bool:
    """Two eager runs on the same inputs disagree at leaf `index`: memory the kernel leaves
    unwritten (rows past a varlen op's last offset) or a nondeterministic kernel. Such
    values say nothing about a compiled graph."""
    leaves = []
    for _ in range(2):
        args, kwargs = exact_copies((run.sample.args, run.sample.kwargs))
        run.sample.enter()
        leaves.append(tree_flatten((op(*args, **kwargs), args, kwargs))[0])
    first, second = (found[index] if index < len(found) else None for found in leaves)
    return isinstance(first, torch.Tensor) and not _close(first, second)


def check_unused_marks(check: OpCheck, runs: list[RecordedCall]) -> None:
    """A `!` no sample wrote: a warning, a failure under --strict."""
    written = {name for run in runs for name in run.call.written}
    for name in sorted(check.marked - written):
        reason = (f"marks `{name}` mutable but never writes it (over any sample): "
                  "drop the `!` or functionalization copies it for nothing")
        check.out.fail(reason) if check.strict else check.out.warn(reason)


CHECKS: dict[str, Check] = {
    "writes": check_writes,
    "fake_vs_real": check_fake,
    "meta_device": check_meta_device,
    "dynamic_shapes": check_dynamic,
    "opcheck": check_opcheck,
    "fullgraph_compile": check_compile,
    "unused_marks": check_unused_marks,
    "opcheck_no_aot": check_opcheck_no_aot,
}
DEFAULT_CHECKS: tuple[str, ...] = tuple(c for c in CHECKS if c != "opcheck_no_aot")


@contextlib.contextmanager
def _no_trace_log() -> Iterator[None]:
    """torch's structured-trace logger (tlparse's) hands its records to whatever handlers
    it holds, pytest's log capture among them: a failing check would show dozens of empty
    DEBUG lines. Off while the checks run, unless TORCH_TRACE asks for the trace: its
    handlers are taken off, not the logger disabled, since torch builds every record (FX
    graphs printed whole) while the logger holds a handler, disabled or not, and the idle
    one torch installs never removes itself if no record reaches it (6 to 11% of the
    bundled library's checks)."""
    log = logging.getLogger("torch.__trace")
    handlers = [] if os.environ.get("TORCH_TRACE") else log.handlers[:]
    for handler in handlers:
        log.removeHandler(handler)
    try:
        yield
    finally:
        for handler in handlers:
            log.addHandler(handler)


def check_op(op: str | OpOverload, samples: Iterable[SampleInput],
             checks: Iterable[str] = DEFAULT_CHECKS, *, meta_kind: MetaKind | None = None,
             meta_source: str = "", strict: bool = False,
             on_check: Callable[[str], None] | None = None) -> CheckOutcome:
    """Run the real kernel once per sample, then each named check over those calls, in
    order; reasons name argument or output. `meta_kind` defaults to what the dispatcher
    says now (a fake registered since listing the ops counts). `on_check` hears each step's
    name before it runs (`kernel`, then each check): the worker's crash attribution."""
    with _no_trace_log():
        return _check_op(op, samples, checks, meta_kind, meta_source, strict, on_check)


def _check_op(op: str | OpOverload, samples: Iterable[SampleInput],
              checks: Iterable[str], meta_kind: MetaKind | None, meta_source: str,
              strict: bool, on_check: Callable[[str], None] | None) -> CheckOutcome:
    overload = resolve_overload(op) if isinstance(op, str) else op
    if meta_kind is None:
        meta_kind = meta_impl(overload._schema.name + (
            f".{overload._overloadname}" if overload._overloadname != "default" else ""),
            overload)[0]
    check = OpCheck(overload, meta_kind, meta_source, strict)
    runs, rejected = [], []
    if on_check:
        on_check(KERNEL_STEP)
    for sample in samples:
        try:
            runs.append(observe(overload, sample.args, sample.kwargs, setup=sample.setup))
        except Exception as exc:  # a fake is judged only on inputs the kernel accepts
            rejected.append(first_line(exc))
    check.out.sample_count = len(runs)
    if overruns := [r.overrun for r in runs if r.overrun]:
        check.out.note(f"kernel finding: it writes past the end of `{overruns[0]}` on "
                       f"{len(overruns)} of {len(runs)} samples (memory it does not own)")
    if rejected and not runs:
        check.out.fail(f"the kernel rejects every sample ({len(rejected)}): {rejected[0]}")
        return check.out
    if rejected:
        check.out.note(f"the kernel rejects {len(rejected)} of {len(rejected) + len(runs)} "
                       f"samples ({rejected[0]}): the meta is judged on the others")
    for name in checks:
        if on_check:
            on_check(name)
        CHECKS[name](check, runs)
    return check.out
