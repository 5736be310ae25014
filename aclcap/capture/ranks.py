"""aclcap capture --nproc N: the whole capture pipeline on every rank, and the checks only
several ranks can make: the same collectives per size (before any real step runs), the same
graphs and breaks, replicated outputs equal on every rank, replay == eager on each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from aclcap.capture.collectives import Collective, as_dicts, first_mismatch, record_collectives
from aclcap.capture.options import CaptureOptions
from aclcap.capture.run import CaptureReport, CaptureRow, capture_step, failed_rows, prepared_step
from aclcap.errors import UsageError
from aclcap.graph.distributed import RankInfo, launch
from aclcap.graph.step import StepContext
from aclcap.status import Status


@dataclass
class RankCapture:
    report: CaptureReport
    collectives: dict[str, list[dict]]
    mismatch: str | None = None  # ranks issue different collectives: nothing was run


def _replicated_reasons(step: StepContext, report: CaptureReport, sizes: list[int],
                        info: RankInfo) -> dict[int, list[str]]:
    """Per size, how the outputs the model declares replicated differ between ranks after
    one replay on the same inputs. Every rank replays every size (collectives inside)."""
    found: dict[int, list[str]] = {}
    for size in sizes:
        cap = report.captured.get(size)
        outputs = None
        if cap is not None:
            out = cap.replay(step.inputs(size))
            leaves = out if isinstance(out, (tuple, list)) else (out,)
            outputs = [leaves[i].detach().cpu().clone() for i in step.spec.replicated_outputs
                       if i < len(leaves)]
        everyone = info.exchange(outputs)
        if any(o is None for o in everyone):
            continue
        for j, (index, ref) in enumerate(zip(step.spec.replicated_outputs, everyone[0],
                                             strict=False)):
            for rank, theirs in enumerate(everyone[1:], start=1):
                other = theirs[j]
                if other.shape != ref.shape or not torch.allclose(
                        other.float(), ref.float(), **step.tolerance):
                    err = (other.float() - ref.float()).abs().max().item() \
                        if other.shape == ref.shape else float("nan")
                    found.setdefault(size, []).append(
                        f"output {index} is declared replicated but differs between rank 0 "
                        f"and rank {rank} (max abs err {err:.3g})")
    return found


def capture_rank(info: RankInfo, options: CaptureOptions) -> RankCapture:
    """One rank's capture (run by the launcher after the process group is up)."""
    step = prepared_step(options)
    sizes = sorted(set(options.shapes or step.spec.shapes))
    info.phase("comparing the collectives of every rank")
    mine = record_collectives(step.model, {s: step.inputs(s) for s in sizes}, step.spec.path)
    everyone: list[dict[int, list[Collective]]] = info.exchange(mine)
    if not any(calls for ranks in everyone for calls in ranks.values()):
        raise UsageError(f"model file {step.spec.path}: the step issues no collective over its "
                         "process group: with --nproc every rank must use torch.distributed "
                         "(functional collectives); run it without --nproc")
    if mismatch := first_mismatch(everyone):
        from aclcap.capture.trace_report import TraceReport

        report = CaptureReport(step.spec.name, step.device, options.dtype,
                               step.backend.mechanism,
                               failed_rows(sizes, step.backend.mechanism, [mismatch]),
                               TraceReport(graph_count=0), False,
                               model_path=str(step.spec.path))
    else:
        report = _capture_and_compare(info, step, sizes, options)
    for row in report.rows:
        row.rank = info.rank
    return RankCapture(report, as_dicts(mine), mismatch)


def _capture_and_compare(info: RankInfo, step: StepContext, sizes: list[int],
                         options: CaptureOptions) -> CaptureReport:
    report = capture_step(step, replace(options, shapes=tuple(sizes)),
                          lambda msg, done, total: info.phase(msg))
    if step.spec.replicated_outputs:
        info.phase("comparing replicated outputs across ranks")
        for size, reasons in _replicated_reasons(step, report, sizes, info).items():
            for row in report.rows:
                if row.size == size and row.padded_to is None:
                    row.reasons += reasons
                    row.status = Status.FAIL
    report.captured = {}  # graphs stay in the rank; the report travels to the parent
    return report


def _worst(rows: list[CaptureRow]) -> CaptureRow:
    return max(rows, key=lambda r: (r.status != Status.PASS, r.max_abs_err or 0.0))


def _cross_rank(reports: list[CaptureReport]) -> list[str]:
    """(a): every rank traced the same number of graphs, breaking at the same lines."""
    found = []
    ref = reports[0].trace
    for rank, report in enumerate(reports[1:], start=1):
        t = report.trace
        if t.graph_count != ref.graph_count:
            found.append(f"rank {rank} traced {t.graph_count} graph(s), rank 0 "
                         f"{ref.graph_count}: ranks would capture different graphs")
        lines = [(Path(b.file).name, b.line) for b in t.graph_breaks]
        if lines != [(Path(b.file).name, b.line) for b in ref.graph_breaks]:
            found.append(f"rank {rank} breaks the graph at {lines}, rank 0 at "
                         f"{[(Path(b.file).name, b.line) for b in ref.graph_breaks]}")
    return found


def merge_ranks(results: list[RankCapture]) -> CaptureReport:
    """One report for all ranks: rank 0's trace, every rank's rows in `rank_rows`, and per
    size the worst rank's row (a failing one first, then the largest error) in `rows`."""
    reports = [r.report for r in results]
    every = [row for report in reports for row in report.rows]
    shown = []
    for key in sorted({(r.size, r.padded_to or 0) for r in every}):
        shown.append(_worst([r for r in every if (r.size, r.padded_to or 0) == key]))
    mismatch = [results[0].mismatch] if results[0].mismatch else []
    merged = replace(reports[0], rows=shown, rank_rows=every,
                     cross_rank=mismatch or _cross_rank(reports))
    merged.backend = replace(reports[0].backend, ranks=len(reports),
                             collectives=[r.collectives for r in results])
    return merged


def run_capture_ranks(options: CaptureOptions, on_phase: Callable[[str], None] | None = None
                      ) -> CaptureReport:
    """Capture on `options.nproc` ranks; bad input, a rank's error or a deadlock raise."""
    from aclcap.devices import resolve_device

    if options.nproc is None or options.model is None:
        raise ValueError("run_capture_ranks needs options.nproc and options.model")
    if options.bisect:
        raise UsageError("--bisect runs in one process: leave out --nproc")
    resolved = resolve_device(options.device)
    results = launch(capture_rank, {"options": replace(options, device=resolved)},
                     options.nproc, resolved, options.timeout, options.port,
                     Path(options.model), on_phase)
    return merge_ranks(results)
