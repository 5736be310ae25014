"""aclcap capture: trace a model, capture one graph per size with the device's mechanism,
replay on fresh inputs and prove the replay matches eager (outputs and mutated inputs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from aclcap.accuracy import LogprobResult, logprob_check
from aclcap.backends import backend_for
from aclcap.backends.base import Captured, CaptureError
from aclcap.compare import Comparison, compare, tolerance_for
from aclcap.devices import resolve_device
from aclcap.errors import UsageError
from aclcap.metachecks import clone_tensors
from aclcap.model import ModelSpec, build, inputs, load_model_file, size_dims
from aclcap.trace import TraceReport, trace_model

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UsageError(f"--dtype {name!r}: choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


@dataclass
class CaptureRow:
    """One row of the capture table (../shared/README.md section 3)."""

    size: int
    mechanism: str
    capture_us: float | None
    memory_bytes: int | None
    max_abs_err: float | None
    max_rel_err: float | None
    status: str
    reasons: list[str] = field(default_factory=list)
    padded_to: int | None = None  # --pad rows: the capture size this size replayed on
    replays: int = 1  # each on its own fresh inputs, each compared with eager
    token_agreement: float | None = None  # models with LOGITS = True
    max_logprob_err: float | None = None


@dataclass
class CaptureReport:
    model: str
    device: str
    dtype: str
    mechanism: str
    rows: list[CaptureRow]
    trace: TraceReport
    fullgraph: bool
    backend: dict[str, Any] = field(default_factory=dict)
    bisect: dict[str, Any] | None = None

    def totals(self) -> dict[str, Any]:
        """Capture time and memory over all sizes, against the largest single graph: one
        shared pool, largest first, should hold little more than the largest graph."""
        exact = [r for r in self.rows if r.padded_to is None and r.memory_bytes is not None]
        if not exact:
            return {}
        largest = max(exact, key=lambda r: r.size).memory_bytes or 0
        total = largest if self.mechanism == "aoti" else sum(r.memory_bytes or 0 for r in exact)
        return {"capture_us": sum(r.capture_us or 0 for r in exact), "memory_bytes": total,
                "largest_graph_bytes": largest,
                "memory_over_largest": total / largest if largest else None,
                "capture_order": self.backend.get("capture_order", [])}

    @property
    def exit_code(self) -> int:
        failed = any(r.status != "pass" for r in self.rows)
        return 1 if failed or (self.fullgraph and self.trace.graph_breaks) else 0

    def result_rows(self) -> list[dict]:
        return [asdict(r) for r in self.rows]


def _labelled(outputs: Any, args: tuple, mutated: list[int]) -> dict[str, Any]:
    leaves = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    labelled: dict[str, Any] = {f"output {i}": o for i, o in enumerate(leaves)}
    labelled.update({f"input {i} (mutated)": args[i] for i in mutated})
    return labelled


def _eager(model: torch.nn.Module, args: tuple) -> tuple[Any, tuple, list[int]]:
    """Eager outputs, the inputs after the step, and which of them the step mutated."""
    after = clone_tensors(args)
    with torch.no_grad():
        out = model(*after)
    mutated = [i for i, (a, b) in enumerate(zip(args, after, strict=True)) if not torch.equal(a, b)]
    return out, after, mutated


REPLAYS = 2  # a graph must match eager on every replay, not only the first


def _check(model: torch.nn.Module, cap: Captured, args: tuple, tol: dict[str, float],
           logits: bool) -> tuple[Comparison, LogprobResult | None]:
    """Replay on `args` (fresh) and compare with eager on the same values."""
    want_out, want_args, mutated = _eager(model, args)
    got_args = clone_tensors(args)
    got_out = cap.replay(got_args)
    result = compare(_labelled(want_out, want_args, mutated),
                     _labelled(got_out, got_args, mutated), tol)
    lp = logprob_check(_first(want_out), _first(got_out)) if logits else None
    return result, lp


def _first(outputs: Any) -> torch.Tensor:
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def _replay_row(model: torch.nn.Module, spec: ModelSpec, cap: Captured, mechanism: str,
                device: str, dtype: torch.dtype, tol: dict[str, float]) -> CaptureRow:
    """REPLAYS replays on different fresh inputs; says so when only the first (or only a
    later) one differs: state that is stale at first replay, or leaks between replays."""
    checks = [_check(model, cap, inputs(spec, cap.size, device, dtype), tol, spec.logits)
              for _ in range(REPLAYS)]
    reasons = [f"replay {i + 1}: {reason}" for i, (c, lp) in enumerate(checks)
               for reason in c.reasons + (lp.reasons if lp else [])]
    bad = [not (c.ok and (lp is None or lp.ok)) for c, lp in checks]
    if bad[0] and not any(bad[1:]):
        reasons.insert(0, "the first replay differs from eager, later ones match")
    elif not bad[0] and any(bad[1:]):
        reasons.insert(0, "the first replay matches eager, a later one differs")
    lps = [lp for _, lp in checks if lp is not None]
    return CaptureRow(
        cap.size, mechanism, cap.capture_us, cap.memory_bytes,
        max(c.max_abs_err for c, _ in checks), max(c.max_rel_err for c, _ in checks),
        "fail" if any(bad) else "pass", reasons, replays=REPLAYS,
        token_agreement=min(lp.token_agreement for lp in lps) if lps else None,
        max_logprob_err=max(lp.max_logprob_err for lp in lps) if lps else None)


def pad_to(args: tuple, dims: list[list[int]], size: int, target: int) -> tuple:
    """Pad every size dim from `size` to `target` by repeating the last token: a padded
    token recomputes and rewrites exactly what the last real one does, so it leaves the KV
    cache as the unpadded step would (vLLM points padded tokens at a pad slot instead; this
    works for any model without knowing which input is the slot mapping)."""
    padded = []
    for t, ds in zip(args, dims, strict=True):
        for d in ds:
            tail = t.narrow(d, size - 1, 1).expand(*[target - size if i == d else -1
                                                     for i in range(t.dim())])
            t = torch.cat((t, tail), dim=d)
        padded.append(t.contiguous())
    return tuple(padded)


def unpad(args: tuple, dims: list[list[int]], size: int) -> tuple:
    """The inverse of pad_to: each size dim cut back to `size`."""
    cut = []
    for t, ds in zip(args, dims, strict=True):
        for d in ds:
            t = t.narrow(d, 0, size)
        cut.append(t)
    return tuple(cut)


def _cut_outputs(outputs: Any, size: int, target: int) -> Any:
    leaves = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    cut = tuple(o[:size] if isinstance(o, torch.Tensor) and o.dim() and o.shape[0] == target
                else o for o in leaves)
    return cut if isinstance(outputs, (tuple, list)) else cut[0]


def padded_sizes(capture_sizes: list[int]) -> dict[int, int]:
    """Each size between the capture sizes -> the capture size it is padded up to."""
    ordered = sorted(capture_sizes)
    return {size: next(s for s in ordered if s > size)
            for size in range(ordered[0] + 1, ordered[-1]) if size not in ordered}


def _pad_rows(model: torch.nn.Module, spec: ModelSpec, captured: dict[int, Captured],
              dims: list[list[int]], mechanism: str, device: str, dtype: torch.dtype,
              tol: dict[str, float]) -> list[CaptureRow]:
    rows = []
    for size, target in padded_sizes(list(captured)).items():
        args = inputs(spec, size, device, dtype)
        want_out, want_args, mutated = _eager(model, args)
        got_args = pad_to(args, dims, size, target)
        got_out = captured[target].replay(got_args)
        result = compare(_labelled(want_out, want_args, mutated),
                         _labelled(_cut_outputs(got_out, size, target),
                                   unpad(got_args, dims, size), mutated), tol)
        rows.append(CaptureRow(size, mechanism, None, None, result.max_abs_err,
                               result.max_rel_err, "pass" if result.ok else "fail",
                               result.reasons, padded_to=target))
    return rows


def run_capture(
    model_path: str,
    shapes: list[int] | None = None,
    device: str = "auto",
    dtype: str = "float32",
    fullgraph: bool = False,
    pad: bool = False,
    bisect: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> CaptureReport:
    """The whole capture pipeline of one model file; bad input raises UsageError.
    `on_progress(message, done, total)` is told each step: trace, capture and replay per
    size, padded sizes, bisection."""
    torch_dtype = parse_dtype(dtype)
    resolved = resolve_device(device)
    spec = load_model_file(model_path)
    sizes = sorted(set(shapes or spec.shapes))
    model = build(spec, resolved, torch_dtype)
    tol = tolerance_for(torch_dtype, spec.tolerance)
    total = 1 + 2 * len(sizes) + pad + bisect
    done = 0

    def step(message: str) -> None:
        nonlocal done
        if on_progress:
            on_progress(message, done, total)
        done += 1

    step("tracing with torch.compile")
    trace = trace_model(model, inputs(spec, max(sizes), resolved, torch_dtype), spec.path)
    backend = backend_for(resolved)
    report = CaptureReport(spec.name, resolved, dtype, backend.mechanism, [], trace, fullgraph)
    try:
        captured = backend.capture(model, spec, sizes, resolved, torch_dtype,
                                   on_size=lambda s: step(f"capturing size {s} "
                                                          f"({backend.mechanism})"))
    except CaptureError as exc:
        report.rows = [CaptureRow(s, backend.mechanism, None, None, None, None, "fail",
                                  [str(exc)]) for s in sizes]
        report.backend = backend.summary()
        return report
    report.backend = backend.summary()
    by_size = {c.size: c for c in captured}
    for size in sizes:
        step(f"replaying size {size} and comparing with eager")
        report.rows.append(_replay_row(model, spec, by_size[size], backend.mechanism, resolved,
                                       torch_dtype, tol))
    for row in report.rows:  # graph mode built on a wrong fake cannot be trusted
        for bad in trace.custom_ops_wrong_meta:
            row.status = "fail"
            row.reasons.append(f"{bad['op']} has a wrong meta impl: {bad['reason']}")
    if pad:
        step("replaying padded sizes")
        dims = size_dims(spec, resolved, torch_dtype)
        report.rows += _pad_rows(model, spec, by_size, dims, backend.mechanism, resolved,
                                 torch_dtype, tol)
        report.rows.sort(key=lambda r: r.size)
    if bisect and any(r.status == "fail" for r in report.rows):
        from aclcap.bisect import bisect_model

        step("bisecting the first diverging node")
        failing = next(r for r in report.rows if r.status == "fail")
        report.bisect = bisect_model(model, inputs(spec, failing.padded_to or failing.size,
                                                   resolved, torch_dtype),
                                     size_dims(spec, resolved, torch_dtype), tol, spec.path)
    step("done")
    return report
