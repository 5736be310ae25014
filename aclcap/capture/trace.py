"""Trace a model with torch.compile's frontend and say what landed in a graph: graph count,
every break with the user's source line, op count per graph, and the custom ops inside
graphs vs those left to run eagerly between them. The facts are read from the graphs a
CompileLog's backend was handed, as torch._dynamo.explain reads them from its own backend:
where the compile log needs no compiled code (aoti), its pass over the sizes is the trace,
so the step is traced once, not once to explain and again to log the compiles."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from aclcap._compat import OpOverload, OpOverloadPacket, dynamo_counters, op_names
from aclcap._tensors import clone_tensors
from aclcap.capture.trace_report import (
    DYNAMIC_SHAPE,
    NO_META,
    GraphBreak,
    TraceReport,
    data_dependent,
)
from aclcap.draw_state import restore
from aclcap.errors import first_line, first_text_line, innermost, summary
from aclcap.graph.compiles import CompileLog, compile_over_sizes
from aclcap.loading.libraries import BUILTIN_NAMESPACES
from aclcap.meta.fakecheck import fake_mismatches
from aclcap.meta.observe import RecordedCall
from aclcap.meta.recorder import CallRecorder
from aclcap.meta.registry import MetaKind, list_ops, resolve_overload


def _custom_name(target: Any) -> str | None:
    """ns::name of a custom op target (overload or packet), else None."""
    if isinstance(target, (OpOverload, OpOverloadPacket)):
        qualified = target._qualified_op_name if isinstance(
            target, OpOverloadPacket) else target._schema.name
        ns = qualified.split("::", 1)[0]
        return qualified if ns not in BUILTIN_NAMESPACES else None
    return None


def _wrong_fakes(calls: list[RecordedCall], ops: list[str]) -> list[dict[str, Any]]:
    """Per op, the fake's mismatches over every recorded call, with the sizes it is wrong
    at and those it is right at; `defect` "schema" where the kernel returns a view its
    schema does not declare, which no fake can match."""
    wrong: dict[str, dict[str, Any]] = {}
    right: dict[str, set[int]] = {}
    for recorded in calls:
        name, size = recorded.call.op.rsplit(".", 1)[0], recorded.step_size
        if name not in ops:
            continue
        sample, op = recorded.sample, resolve_overload(recorded.call.op)
        hidden = _undeclared_aliases(op, recorded)
        reasons = hidden or fake_mismatches(op, sample.args, sample.kwargs, recorded.outputs)
        if not reasons:
            right.setdefault(name, set()).add(size)
            continue
        entry = wrong.setdefault(name, {"op": name, "reason": reasons[0], "sizes_wrong": [],
                                        "defect": "schema" if hidden else "meta"})
        if size not in entry["sizes_wrong"]:
            entry["sizes_wrong"].append(size)
    found = []
    for name, entry in wrong.items():
        good = sorted(right.get(name, set()) - set(entry["sizes_wrong"]))
        entry["sizes_right"] = good
        if good:
            entry["reason"] += (f" (wrong at size {', '.join(map(str, entry['sizes_wrong']))}; "
                                f"right at size {', '.join(map(str, good))})")
        found.append(entry)
    return found


def _undeclared_aliases(op: OpOverload, recorded: RecordedCall) -> list[str]:
    """Outputs the kernel returned as a view of an input at this call where the schema
    declares no alias (a fast path at one token returning a slice): a compiled graph gives
    a fresh tensor there, whatever the fake, and the replay differs from eager."""
    found = []
    for i, (out, ret) in enumerate(zip(recorded.call.outputs or (), op._schema.returns,
                                       strict=False)):
        if out is not None and out.aliases is not None and ret.alias_info is None:
            shapes = ", ".join(f"{a.name} {list(a.tensor.shape)}" for a in recorded.call.args
                               if a.tensor is not None)
            found.append(f"output {i} is a view of `{out.aliases}` at {shapes}, but the schema "
                         "declares no alias: a graph returns a fresh tensor there; make the "
                         "kernel return a copy (or a view always, annotated in the schema)")
    return found


def _break_site(stack: list, model_file: Path | None) -> tuple[str, int]:
    frames = list(stack or [])
    if model_file is not None:
        inside = [f for f in frames if Path(f.filename).resolve() == model_file.resolve()]
        frames = inside or frames
    if not frames:
        return "<unknown>", 0
    return frames[-1].filename, frames[-1].lineno or 0


# Where a message names the op that failed, most specific first: the FX node being run,
# the op a fake-impl error names, the node of an "Original traceback".
_OP_IN_ERROR = (
    re.compile(r"call_function\[target=torch\.ops\.(\w+)\.(\w+)"),
    re.compile(r"call_function (?:torch\.ops\.)?(\w+)\.(\w+)\("),
    re.compile(r"registered for <CustomOpDef\((\w+)::(\w+)\)>"),
    re.compile(r"registered for (\w+)::(\w+)"),
    re.compile(r"UnsupportedOperatorException: (\w+)\.(\w+)"),
)
_INNER_CAUSE = re.compile(r"got (\w+)\((['\"])(.*?)\2\)\s*$", re.MULTILINE)


def failing_op(text: str) -> str | None:
    """The custom op a tracing error is about, read from the error itself (never from the
    user's source line it quotes, which may call several ops)."""
    known = set(op_names())
    for pattern in _OP_IN_ERROR:
        for ns, name in pattern.findall(text):
            if ns not in BUILTIN_NAMESPACES and f"{ns}::{name}" in known:
                return f"{ns}::{name}"
    # Composite ops decompose before a dispatch mode sees them: any op the message names
    # outside the quoted user code.
    message = text.split("from user code:")[0].split("Original traceback:")[0]
    named = [f"{ns}::{name}" for ns, name in
             re.findall(r"\b([A-Za-z_]\w*)(?:\.|::)([A-Za-z_]\w*)", message)
             if ns not in BUILTIN_NAMESPACES]
    return next((n for n in named if n in known), None)


def failure_site(text: str, model_file: Path | None) -> tuple[str, int]:
    """The model-file line a torch error's user stack ("from user code", "Original
    traceback") ends in."""
    sites = re.findall(r'File "([^"]+)", line (\d+)', text)
    if model_file is not None:
        sites = [s for s in sites if Path(s[0]).resolve() == model_file.resolve()] or sites
    return (sites[-1][0], int(sites[-1][1])) if sites else ("<unknown>", 0)


def failure_reason(exc: BaseException) -> str:
    """The error's cause in one line: Dynamo's "got RuntimeError('...')" is the cause of
    its "RuntimeError when making fake tensor call", so it comes first."""
    cause = _INNER_CAUSE.search(str(exc))
    if cause is None:
        return first_line(exc)
    message = cause.group(3).replace("\\n", "\n").replace("\\'", "'")
    return f"{cause.group(1)}: {summary(message)}"


def located(exc: BaseException, model_file: Path) -> str:
    """A capture failure's message with the op and the model line it failed on, read from
    the torch error it wraps (an FX node's "Original traceback"), where the message lacks
    them."""
    message = str(exc)
    text = "\n".join(str(e) for e in (exc, exc.__cause__, innermost(exc)) if e is not None)
    file, line = failure_site(text, model_file)
    if not line or Path(file).resolve() != model_file.resolve() \
            or f"{model_file.name}:{line}" in message:
        return message
    op = failing_op(text)
    return f"{message} ({op + ' ' if op else ''}at {model_file.name}:{line})"


def _tracing_failure(exc: Exception, model_file: Path | None) -> dict[str, Any]:
    """Which custom op and which model-file line a Dynamo failure names, read from the
    error alone (the FX node it ran, the op its fake-impl error names, the "from user
    code" stack), never from the ops the step happened to call first."""
    text = str(innermost(exc))
    file, line = failure_site(text, model_file)
    frames = [[f, int(n)] for f, n in re.findall(r'File "([^"]+)", line (\d+)', text)]
    return {"op": failing_op(text), "file": file, "line": line, "reason": failure_reason(exc),
            "frames": frames, "model": str(model_file) if model_file else None}


def _skipped_frame(reason: str, model_file: Path | None) -> dict[str, Any]:
    """The failure of a step Dynamo gave up whole (a graph break inside a loop, which it
    cannot resume: a MoE expert loop's `nonzero`): no graph at all, the step runs eagerly,
    and piecewise capture passed with nothing captured."""
    what = first_text_line(reason)
    if what == DYNAMIC_SHAPE:  # the reason then reads data-dependent (TraceReport.makes_read)
        what += " (a data-dependent output size)"
    return {"op": None, "file": str(model_file) if model_file else "", "line": 0,
            "reason": f"Dynamo gave up the whole step and runs it eagerly, no graph at all "
                      f"(a graph break inside a loop, which it cannot resume): {what}",
            "frames": [], "model": str(model_file) if model_file else None}


def _restored(inputs_by_size: dict[int, tuple], order: list[int]
              ) -> Iterator[tuple[int, tuple]]:
    """(size, a copy of its draw), each draw's forward context put back as it is reached."""
    for size in order:
        restore(inputs_by_size[size])
        yield size, clone_tensors(inputs_by_size[size])


def trace_model(model: torch.nn.Module, inputs_by_size: dict[int, tuple],
                model_file: Path | None = None, dims: list[list[int]] | None = None,
                log: CompileLog | None = None) -> TraceReport:
    """Run the eager step at every size under a recorder whose calls cross-check the fakes,
    and torch.compile with `log`'s backend over every size, largest first, size dims
    dynamic (`log` then holds every compile). Without `log`, or where its backend is not
    Dynamo's `eager`, a throwaway one with `eager` traces the largest size only: the
    graphs the first call compiled are explain's graphs either way."""
    with torch.no_grad():  # each run gets its own copy: the step mutates its inputs
        # Every distinct custom-op call per size, to find the ops no graph holds and to
        # cross-check their fakes afterwards. torch's CrossRefFakeMode compares the same
        # way, but raises on the first mismatch inside the step (later calls go unchecked).
        recorder = CallRecorder(lambda name: name.split("::", 1)[0] not in BUILTIN_NAMESPACES)
        for size, args in sorted(inputs_by_size.items()):
            recorder.step_size = size
            restore(args)  # the forward context make_inputs set with this size's draw
            with recorder:
                model(*clone_tensors(args))
    # Compiled code allocates its buffers from the fakes, and one from a wrong fake may write
    # out of bounds: only a log whose backend runs the graphs as eager does is filled here,
    # before the fakes are judged; another one is filled by the capture, after.
    order, logged = sorted(inputs_by_size, reverse=True), log is not None and log.runs_eagerly
    given_up = dict(dynamo_counters()["unimplemented"])  # what Dynamo could not trace, so far
    if not logged:
        log, order = CompileLog("eager", model_file), order[:1]
    pinned = None
    try:
        try:
            compile_over_sizes(model, _restored(inputs_by_size, order), dims or [], log)
        except Exception as exc:
            if not pins_its_size(exc):
                raise
            # The step pins its own size (`if x.shape[0] == 8`), which a required dynamic
            # dim refuses: traced again with the size only suggested, Dynamo specializes
            # where the step does, and the export splits by its guards (issue 50).
            pinned = _tracing_failure(exc, model_file)
            log.reset()
            compile_over_sizes(model, _restored(inputs_by_size, order), dims or [], log,
                               maybe=True)
            if any(data_dependent(r) for r in log.break_reasons):
                # What pinned the size was a value read on the host (`lengths.tolist()`
                # feeding `torch.split`): the failure stands, a data-dependent one.
                return _untraced(recorder, {**pinned, "data_dependent": True}, [])
    except Exception as exc:  # a hard error inside Dynamo: named, never an internal error
        return _untraced(recorder, _tracing_failure(exc, model_file),
                         log.compiles if logged else [])
    graphs = [graph.module for graph in log.graphs[0]] if log.graphs else []
    if not graphs and (skipped := [r for r, n in dynamo_counters()["unimplemented"].items()
                                   if n > given_up.get(r, 0)]):
        return _untraced(recorder, _skipped_frame(skipped[0], model_file),
                         log.compiles if logged else [])
    ops_per_graph = [[n.target for n in gm.graph.nodes if n.op == "call_function"]
                     for gm in graphs]  # as explain counts them
    breaks: dict[tuple, GraphBreak] = {}
    for gm in graphs:
        br = gm.compile_subgraph_reason
        if not br.graph_break:
            continue
        file, line = _break_site(br.user_stack, model_file)
        key = (first_text_line(br.reason), file, line)
        found = breaks.setdefault(key, GraphBreak(key[0], file, line))
        found.frames += [[f.filename, f.lineno or 0] for f in br.user_stack or []
                         if [f.filename, f.lineno or 0] not in found.frames]
    in_graph: list[str] = []
    for ops in ops_per_graph:
        for target in ops:
            name = _custom_name(target)
            if name and name not in in_graph:
                in_graph.append(name)
    outside = [name for name in recorder.seen if name not in in_graph]
    meta_missing = _meta_missing(outside)
    wrong_meta = _wrong_fakes(recorder.records, in_graph)
    first = next(iter(breaks.values()), None)
    where = f" (graph break at {Path(first.file).name}:{first.line})" if first else ""
    return TraceReport(
        graph_count=len(graphs),
        graph_breaks=list(breaks.values()),
        ops_per_graph=[len(ops) for ops in ops_per_graph],
        custom_ops_in_graph=in_graph,
        custom_ops_outside_graph=[
            {"op": name, "reason": NO_META if name in meta_missing else
             f"runs eagerly between graphs{where}", **_line(recorder, name)}
            for name in outside],
        custom_ops_wrong_meta=wrong_meta,
        recompiles=log.compiles if logged else [],
        size_pinned=pinned,
    )


def _untraced(recorder: CallRecorder, error: dict[str, Any], recompiles: list) -> TraceReport:
    """The report of a step that no graph came from: the failure, and every custom op the
    eager step called as outside any graph, those with no meta impl said so (the trace
    stops at the first; the user would meet the others one run at a time)."""
    missing = _meta_missing(recorder.seen)
    return TraceReport(graph_count=0, custom_ops_outside_graph=[
        {"op": name, "reason": NO_META if name in missing else "tracing failed before any "
         "graph", **_line(recorder, name)} for name in recorder.seen], error=error,
        recompiles=recompiles)


def _line(recorder: CallRecorder, op: str) -> dict[str, Any]:
    """`file` and `line` of the user line that first called `op`, where one was seen."""
    file, line = recorder.lines.get(op, (None, 0))
    return {"file": file, "line": line} if file else {}


def _meta_missing(names: list[str]) -> set[str]:
    """The ops (`ns::name`) among `names` with no meta impl."""
    return {o.dispatcher_name.split(".")[0] for o in list_ops(
        sorted({n.split("::")[0] for n in names})) if o.meta_kind == MetaKind.MISSING}


def pins_its_size(exc: Exception) -> bool:
    """Dynamo refused a required dynamic size that the step specializes (a constraint
    violation with no data-dependent size in it)."""
    text = str(innermost(exc))
    return "Constraints violated" in text and not data_dependent(text)
