"""aclcap capture: trace a model, capture one graph per size with the device's mechanism,
replay on fresh inputs and prove the replay matches eager (outputs and mutated inputs)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aclcap.capture import trace_cache
from aclcap.capture.advice import breaks_allowed, fakes_advice, vllm_refuses, where
from aclcap.capture.fresh import STALE_INPUTS, VARY_TRIES, inputs_are_fresh, varied_draw
from aclcap.capture.frozen import FrozenValue, HostValues, read_reason, stale_reasons
from aclcap.capture.options import CaptureOptions
from aclcap.capture.trace_report import WRONG, TraceReport, breaks_on_values, data_dependent
from aclcap.draw_state import state_names, state_of
from aclcap.errors import CaptureError
from aclcap.graph.backends.base import BackendSummary, Captured
from aclcap.graph.compiles import Compile, CompileLog
from aclcap.graph.padding import padded_sizes
from aclcap.graph.replay import replay_check
from aclcap.graph.step import StepContext, draw_reproducibly, prepare_step
from aclcap.host_values import same_value, show
from aclcap.meta.registrations import recording
from aclcap.meta.state_reads import state_readers
from aclcap.status import Status

REPLAYS = 2  # a graph must match eager on every replay, not only the first


@dataclass
class CaptureRow:
    """One row of the capture table (README: machine-readable output)."""

    size: int
    mechanism: str
    capture_us: float | None
    memory_bytes: int | None
    max_abs_err: float | None
    max_rel_err: float | None
    status: Status
    reasons: list[str] = field(default_factory=list)
    padded_to: int | None = None  # --pad rows: the capture size this size replayed on
    replays: int = 1  # each on its own fresh inputs, each compared with eager
    token_agreement: float | None = None  # models with LOGITS = True
    max_logprob_err: float | None = None
    rank: int | None = None  # --nproc only
    # Whether two calls of make_inputs at this size differed (capture/fresh.py); None
    # where nothing was replayed. Warnings report without failing the row.
    fresh_inputs: bool | None = None
    warnings: list[str] = field(default_factory=list)
    # Op arguments fed by host values at this size (capture/frozen.py): frozen into the
    # graph, or live where their op runs eagerly between pieces.
    frozen_values: list[FrozenValue] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "frozen_values"}


@dataclass
class CaptureReport:
    model: str
    device: str
    dtype: str
    mechanism: str
    rows: list[CaptureRow]
    trace: TraceReport
    fullgraph: bool  # vLLM's rule (the default): a graph break fails every size
    fail_on_recompile: bool = False
    graph_mode: str = "full"
    model_path: str = ""  # as given: the JSON's `model` (`model` is the file's name)
    backend: BackendSummary = field(default_factory=BackendSummary)
    bisect: dict[str, Any] | None = None
    # Replayable graphs by size, for checks after the run (not reported, not pickled).
    captured: dict[int, Captured] = field(default_factory=dict, repr=False, compare=False)
    # --nproc: every rank's rows (`rows` then holds the worst rank's per size) and the
    # failed cross-rank checks.
    rank_rows: list[CaptureRow] = field(default_factory=list)
    cross_rank: list[str] = field(default_factory=list)
    # Wall seconds per phase, in order: prepare (import the model file, build the model),
    # trace, capture (export, compile or load the artifact, capture, per size), replay.
    phases_s: dict[str, float] = field(default_factory=dict)
    # Reads of tensor data on the host inside the step (capture/host_uses.py).
    host_reads: list[dict[str, Any]] = field(default_factory=list)
    # Where the trace came from capture's trace cache: {hit, taken} (capture/trace_cache.py).
    trace_cache: dict[str, Any] | None = None
    # Host inputs the same in every draw, by name: frozen, safe while callers keep them so.
    host_constants: dict[str, Any] = field(default_factory=dict)
    # Where the state make_inputs set outside its inputs lives (a forward context): ops
    # read it live at every cpu replay; a device graph freezes what they read of it.
    draw_state: list[str] = field(default_factory=list)
    # The ops in the graph whose Python kernels read that state: op -> what they read.
    state_readers: dict[str, str] = field(default_factory=dict)

    def frozen_values(self) -> list[FrozenValue]:
        """Every row's host-fed op arguments (JSON `frozen_values`)."""
        return [f for r in self.rows for f in r.frozen_values]

    def totals(self) -> dict[str, Any]:
        """Capture time and memory over all sizes, against the largest single graph: one
        shared pool, largest first, should hold little more than the largest graph."""
        exact = [r for r in self.rows if r.padded_to is None and r.memory_bytes is not None]
        if not exact:
            return {}
        largest = max(exact, key=lambda r: r.size).memory_bytes or 0
        artifacts = self.backend.artifact_bytes
        total = (largest if artifacts is None else artifacts) if self.mechanism == "aoti" \
            else sum(r.memory_bytes or 0 for r in exact)
        return {"capture_us": sum(r.capture_us or 0 for r in exact), "memory_bytes": total,
                "largest_graph_bytes": largest,
                "memory_over_largest": total / largest if largest else None,
                "capture_order": self.backend.capture_order or []}

    def recompiled(self) -> list[Compile]:
        """Compiles after the first size's: what --fail-on-recompile fails on."""
        return self.trace.recompiles[1:]

    @property
    def exit_code(self) -> int:
        failed = any(r.status != Status.PASS for r in self.rows)
        broke = self.fullgraph and self.trace.graph_breaks
        recompiled = self.fail_on_recompile and self.recompiled()
        return 1 if failed or broke or recompiled or self.cross_rank else 0


def failed_rows(sizes: list[int], mechanism: str, reasons: list[str]) -> list[CaptureRow]:
    """Every size failed for the same reasons, before anything could be replayed."""
    return [CaptureRow(s, mechanism, None, None, None, None, Status.FAIL, list(reasons))
            for s in sizes]


def _draws(step: StepContext, size: int, captured: tuple | None = None
           ) -> tuple[list[tuple], bool, list[int]]:
    """REPLAYS calls of make_inputs(size), each with every host value changed from
    `captured` where a draw allows it; whether they differ (compared before any replay or
    eager step can mutate them); the host inputs no draw varied."""
    hosts = step.hosts if captured is not None else ()
    draws, unvaried = [], set(hosts)
    for _ in range(REPLAYS):
        args, same = varied_draw(lambda: step.inputs(size), captured or (), hosts)
        draws.append(args)
        unvaried &= set(same)
    return draws, inputs_are_fresh(draws[0], draws[1]), sorted(unvaried)


def _changes_alone(step: StepContext, cap: Captured, draw: tuple) -> dict[int, bool]:
    """Per host input that `draw` changed from the capture's, whether a replay with only
    that input changed (the others as captured) differs from eager: the cause per input
    where several changed at once."""
    assert cap.draw is not None
    changed = [i for i in step.hosts if not same_value(draw[i], cap.draw[i])]
    if len(changed) < 2:
        return {}
    alone = {}
    for i in changed:
        mixed = tuple(cap.draw[k] if k in step.hosts and k != i else a
                      for k, a in enumerate(draw))
        alone[i] = not replay_check(step, cap, mixed).ok
    return alone


def _fresh(row: CaptureRow, fresh: bool) -> CaptureRow:
    row.fresh_inputs = fresh
    row.warnings += [] if fresh else [STALE_INPUTS]
    return row


def _replay_row(step: StepContext, cap: Captured, mechanism: str,
                host: HostValues | None = None) -> CaptureRow:
    """REPLAYS replays on different fresh inputs; says so when only the first (or only a
    later) one differs: state that is stale at first replay, or leaks between replays.
    With host values, the frozen arguments whose values differ from the capture's lead."""
    draws, fresh, unvaried = _draws(step, cap.size, cap.draw)
    checks = [replay_check(step, cap, args, step.spec.logits) for args in draws]
    reasons = [f"replay {i + 1}: {reason}" for i, c in enumerate(checks) for reason in c.reasons]
    bad = [not c.ok for c in checks]
    if bad[0] and not any(bad[1:]):
        reasons.insert(0, "the first replay differs from eager, later ones match")
    elif not bad[0] and any(bad[1:]):
        reasons.insert(0, "the first replay matches eager, a later one differs")
    frozen, warnings = [], []
    if host is not None and (host.hosts or host.sets_state) and cap.draw is not None:
        failing = next((d for d, b in zip(draws, bad, strict=True) if b), None)
        alone = _changes_alone(step, cap, failing) if failing is not None else {}
        frozen = host.at_size(cap.size, cap.draw, draws, [not b for b in bad], alone)
        warnings = [f"input {host.names[i]} kept its captured value {show(cap.draw[i])} in "
                    f"{VARY_TRIES} draws: no replay tested it frozen (unproven for it)"
                    for i in unvaried]
    reasons = stale_reasons(frozen, step.device) + reasons
    lps = [c.logprobs for c in checks if c.logprobs is not None]
    row = _fresh(CaptureRow(
        cap.size, mechanism, cap.capture_us, cap.memory_bytes,
        max(c.comparison.max_abs_err for c in checks),
        max(c.comparison.max_rel_err for c in checks),
        Status.FAIL if any(bad) else Status.PASS, reasons, replays=REPLAYS,
        token_agreement=min(lp.token_agreement for lp in lps) if lps else None,
        max_logprob_err=max(lp.max_logprob_err for lp in lps) if lps else None), fresh)
    row.frozen_values = frozen
    row.warnings += warnings
    return row


def _pad_rows(step: StepContext, captured: dict[int, Captured], mechanism: str
              ) -> list[CaptureRow]:
    rows = []
    for size, target in padded_sizes(list(captured)).items():
        draws, fresh, _ = _draws(step, size)
        check = replay_check(step, captured[target], draws[0])
        rows.append(_fresh(CaptureRow(size, mechanism, None, None,
                                      check.comparison.max_abs_err,
                                      check.comparison.max_rel_err,
                                      Status.PASS if check.ok else Status.FAIL, check.reasons,
                                      padded_to=target), fresh))
    return rows


def prepared_step(options: CaptureOptions) -> StepContext:
    """The step, its draws reproducible, with the Python kernels its libraries register
    recorded as they load (state_readers reads them)."""
    with recording():
        step = prepare_step(options)
    draw_reproducibly(step)
    return step


def run_capture(options: CaptureOptions,
                on_progress: Callable[[str, int, int], None] | None = None) -> CaptureReport:
    """The whole capture pipeline of one model file; bad input raises UsageError.
    `on_progress(message, done, total)` is told each step: trace, capture and replay per
    size, padded sizes, bisection."""
    started = time.perf_counter()
    step = prepared_step(options)
    prepared = time.perf_counter() - started
    report = capture_step(step, options, on_progress)
    report.phases_s = {"prepare": round(prepared, 3), **report.phases_s}
    return report


def capture_step(step: StepContext, options: CaptureOptions,
                 on_progress: Callable[[str, int, int], None] | None = None) -> CaptureReport:
    """Trace, capture, replay and compare one prepared step (one rank's, with --nproc).
    A run on a cached trace that fails, at any stage, is run again from a fresh trace
    before its verdict: what the cache key cannot see (a step that reads its environment)
    never fails a step."""
    report = _capture_step(step, options, on_progress, cached_trace=True)
    if report.trace_cache and report.exit_code:
        step.backend.index_key = None  # type: ignore[attr-defined]
        report = _capture_step(step, options, on_progress, cached_trace=False)
    return report


def _capture_step(step: StepContext, options: CaptureOptions,
                  on_progress: Callable[[str, int, int], None] | None,
                  cached_trace: bool) -> CaptureReport:
    pad, bisect = options.pad, options.bisect
    sizes = sorted(set(options.shapes or step.spec.shapes))
    total = 1 + 2 * len(sizes) + pad + bisect
    done = 0

    def advance(message: str) -> None:
        nonlocal done
        if on_progress:
            on_progress(message, done, total)
        done += 1

    advance("tracing with torch.compile")
    clock = _PhaseClock()
    example = step.inputs(max(sizes))
    key = trace_cache.capture_key(step, options, sizes)
    hit = trace_cache.load(key) if key and cached_trace else None
    host = None if hit else HostValues(step.model, step.spec.path, example,
                                       _eager_ops(step, options))
    log = CompileLog(step.backend.compile_backend, step.spec.path)
    if hit:  # nothing the trace depends on changed: its report, its compiles, its artifacts
        trace = hit.trace
        log.compiles = list(trace.recompiles)
        step.backend.index_key = hit.index_key  # type: ignore[attr-defined]
    else:
        from aclcap.capture.trace import trace_model  # Dynamo and the fake checks

        trace = trace_model(step.model, {s: step.inputs(s) for s in sizes}, step.spec.path,
                            step.dims, log if step.backend.compile_log_in_trace else None)
    step.size_suggested = trace.size_pinned is not None  # the backends mark as it traced
    mechanism = step.backend.mechanism
    report = CaptureReport(step.spec.name, step.device, step.dtype_name, mechanism, [], trace,
                           options.fullgraph, options.fail_on_recompile,
                           graph_mode=options.graph_mode, model_path=str(step.spec.path),
                           phases_s=clock.phases,
                           trace_cache=trace_cache.as_dict(hit))
    clock.lap("trace")
    # A read the eager step makes counts only where the traced step makes it too
    # (TraceReport.makes_read): libraries read on the host only when not compiling
    # (transformers' mask helpers); the eager run only names the line.
    reads = [r for r in host.reads if r.reader is not None
             and trace.makes_read(r.reader.file, r.reader.line)] if host else []
    failure = None if reads else trace.error_line()  # a host read is named below
    if failure:  # what cannot be traced cannot be captured
        report.rows = failed_rows(sizes, mechanism, _sourced([failure], host))
        return report
    report.host_reads = [r.to_dict() for r in reads]
    if reads and (options.graph_mode == "full" or trace.error):
        # One graph per size cannot hold a value read on the host (nor can a step traced
        # to pieces whose shapes the value decides): nothing is captured.
        unique = {(r.reader.file, r.reader.line): r for r in reads if r.reader}
        # the trace's own failure too: the read explains it, and it is what torch said
        said = [trace.error_line()] if trace.error else []
        report.rows = failed_rows(sizes, mechanism, _sourced(
            [read_reason(r, step.device) for r in unique.values()] + said, host))
        return report
    if trace.graph_breaks and options.fullgraph:
        # vLLM's rule: its compile (fullgraph=True) fails at a break anywhere in the step,
        # piecewise too (its split follows a whole trace): nothing is captured
        report.rows = failed_rows(sizes, mechanism, _sourced(
            _break_reasons(trace, str(step.spec.path), options.graph_mode), host))
        return report
    if trace.custom_ops_wrong_meta:
        # A graph compiled from a wrong fake allocates wrong buffers: running it can write
        # out of bounds, so it is not captured at all.
        wrong = [f"{bad['op']} {WRONG[bad.get('defect', 'meta')]}: {bad['reason']}"
                 for bad in trace.custom_ops_wrong_meta]
        report.rows = failed_rows(sizes, mechanism, wrong)
        return report
    try:
        captured = step.backend.capture(
            step, sizes, on_size=lambda s: advance(f"capturing size {s} ({mechanism})"), log=log)
    except CaptureError as exc:
        failure: CaptureError | None = exc
    else:
        failure = None
    finally:
        trace.recompiles = log.compiles
        report.backend = step.backend.summary()
        clock.lap("capture", step.backend.phases_s)
    # A backend may capture with another mechanism than it planned (aoti -> inductor where
    # torch.export fails): the rows say which one ran, failed or not.
    mechanism = report.mechanism = step.backend.mechanism
    if failure is not None:
        from aclcap.capture.trace import located

        reasons = [located(failure, step.spec.path), *_data_breaks(trace)]
        if missing := trace.missing_fakes():  # export or Inductor met one (--allow-breaks)
            reasons.append(fakes_advice(str(step.spec.path), missing, options.graph_mode))
        report.rows = failed_rows(sizes, mechanism, _sourced(reasons, host))
        return report
    by_size = report.captured = {c.size: c for c in captured}
    for size in sizes:
        advance(f"replaying size {size} and comparing with eager")
        try:
            report.rows.append(_replay_row(step, by_size[size], mechanism, host))
        except CaptureError as exc:  # a fresh draw the captured graphs cannot serve
            report.rows += failed_rows([size], mechanism, _sourced(
                [f"replay: {exc}", *_data_breaks(trace)], host))
    report.host_constants = host.constants() if host else {}
    report.draw_state = state_names(captured[0].static_inputs)
    report.state_readers = state_readers(trace.custom_ops_in_graph,
                                         state_of(captured[0].static_inputs))
    if key and not hit and (index_key := getattr(step.backend, "index_key", None)):
        trace_cache.store(key, trace, index_key)
    if pad:
        advance("replaying padded sizes")
        report.rows += _pad_rows(step, by_size, mechanism)
        report.rows.sort(key=lambda r: r.size)
    if trace.graph_breaks:  # captured around its breaks on request (--allow-breaks)
        allowed = breaks_allowed(len(trace.graph_breaks),
                                 [o["op"] for o in trace.custom_ops_outside_graph])
        for row in report.rows:
            row.warnings.append(allowed)
    if bisect and any(r.status == Status.FAIL for r in report.rows):
        from aclcap.capture.divergence import first_diverging_node

        advance("bisecting the first diverging node")
        failing = next(r for r in report.rows if r.status == Status.FAIL)
        report.bisect = first_diverging_node(step, step.inputs(failing.padded_to or failing.size))
    clock.lap("replay")
    advance("done")
    return report


def _sourced(reasons: list[str], host: HostValues | None) -> list[str]:
    """The reasons, and where a data-dependent size among them came from: the ops of the
    eager step whose output size follows their input's values, with their lines (a MoE
    expert loop's `nonzero`; torch names only the symbol, `Eq(u0, 0)`)."""
    if host is None or not host.sized or not any(
            data_dependent(r) or r.startswith(DATA_BREAK) for r in reasons):
        return reasons
    more = f", and {len(host.sized) - 3} more" if len(host.sized) > 3 else ""
    return [*reasons, "the data-dependent size comes from an op whose output size follows "
            f"its input's values: {'; '.join(s.text() for s in host.sized[:3])}{more}"]


DATA_BREAK = "the step breaks its graph on tensor values"


def _break_reasons(trace: TraceReport, model: str, graph_mode: str) -> list[str]:
    """Why a step that does not trace as one graph fails every size: each break with its
    line, each custom op left outside a graph with the line calling it, the commands that
    write the missing fakes, and vLLM's rule."""
    reasons = [f"graph break at {where(b.file, b.line)}: {b.reason}" for b in trace.graph_breaks]
    reasons += trace.outside_reasons()
    if missing := trace.missing_fakes():
        reasons.append(fakes_advice(model, missing, graph_mode))
    return [*reasons, vllm_refuses(len(trace.graph_breaks))]


def _data_breaks(trace: TraceReport) -> list[str]:
    """Where the traced step broke its graph on tensor values (`nonzero`, `.tolist()`): a
    capture that fails after such a break (piecewise runs the code between the graphs) fails
    because of it, and the row says so."""
    breaks = {f"{DATA_BREAK} at {Path(b.file).name}:{b.line} "
              f"({b.reason}): what follows changes with the data, and a graph replays what "
              "it captured": None for b in trace.graph_breaks
              if breaks_on_values(b.reason)}
    return list(breaks)


def _eager_ops(step: StepContext, options: CaptureOptions) -> frozenset[str]:
    """The ops a piecewise step runs eagerly between its graph pieces; none in full mode."""
    if options.graph_mode != "piecewise":
        return frozenset()
    return frozenset(options.split_ops if options.split_ops is not None
                     else step.spec.splitting_ops)


class _PhaseClock:
    """Seconds since the previous lap, kept under the phase's name: where a run's time went,
    so a user iterating on one op sees which phase to blame."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, name: str, parts: dict[str, float] | None = None) -> None:
        """`parts`: the lap as its own code split it (a backend's export, compile or load,
        capture), in its order; what the parts leave of the lap is added under `name`, so
        the phases always sum to the run."""
        now = time.perf_counter()
        rest = now - self.last - sum((parts or {}).values())
        for part, seconds in (parts or {}).items():
            self.phases[part] = seconds
        self.phases[name] = round(self.phases.get(name, 0.0) + max(rest, 0.0), 3)
        self.last = now
