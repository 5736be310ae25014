"""Trace a model with torch.compile's frontend (torch._dynamo.explain) and say what landed in
a graph: graph count, every break with the user's source line, op count per graph, and the
custom ops inside graphs vs those left to run eagerly between them."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from aclcap._tensors import clone_tensors
from aclcap.errors import first_line, first_text_line
from aclcap.graph.compiles import Compile
from aclcap.meta.fakecheck import fake_mismatches
from aclcap.meta.observe import RecordedCall
from aclcap.meta.recorder import CallRecorder
from aclcap.meta.registry import BUILTIN_NAMESPACES, MetaKind, list_ops, resolve_overload


@dataclass
class GraphBreak:
    reason: str
    file: str
    line: int


@dataclass
class TraceReport:
    graph_count: int
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    ops_per_graph: list[int] = field(default_factory=list)
    custom_ops_in_graph: list[str] = field(default_factory=list)
    custom_ops_outside_graph: list[dict[str, str]] = field(default_factory=list)
    custom_ops_wrong_meta: list[dict[str, Any]] = field(default_factory=list)
    # A hard tracing failure (torch.compile raised, not graph-broke): op, file, line, reason.
    error: dict[str, Any] | None = None
    # Every compile across the capture sizes, in capture order (the first, then recompiles).
    recompiles: list[Compile] = field(default_factory=list)

    def error_line(self) -> str | None:
        """The failure in one line, with the op, the model line and what to run next."""
        if self.error is None:
            return None
        e = self.error
        op = f"{e['op']} " if e["op"] else ""
        where = f" at {Path(e['file']).name}:{e['line']}" if e["line"] else ""
        ns = e["op"].split("::")[0] if e["op"] else "NS"
        return (f"torch.compile cannot trace the step: {op}fails{where}: {e['reason']}; run "
                f"`aclcap check-meta --namespace {ns}` with samples for it")

    def to_dict(self) -> dict:
        return asdict(self)


def _custom_name(target: Any) -> str | None:
    """ns::name of a custom op target (overload or packet), else None."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        qualified = target._qualified_op_name if isinstance(
            target, torch._ops.OpOverloadPacket) else target._schema.name
        ns = qualified.split("::", 1)[0]
        return qualified if ns not in BUILTIN_NAMESPACES else None
    return None


def _wrong_fakes(calls: list[RecordedCall], ops: list[str]) -> list[dict[str, Any]]:
    """Per op, the fake's mismatches over every recorded call, with the sizes it is wrong
    at and those it is right at."""
    wrong: dict[str, dict[str, Any]] = {}
    right: dict[str, set[int]] = {}
    for recorded in calls:
        name, size = recorded.call.op.rsplit(".", 1)[0], recorded.step_size
        if name not in ops:
            continue
        sample = recorded.sample
        reasons = fake_mismatches(resolve_overload(recorded.call.op), sample.args,
                                  sample.kwargs, recorded.outputs)
        if not reasons:
            right.setdefault(name, set()).add(size)
            continue
        entry = wrong.setdefault(name, {"op": name, "reason": reasons[0], "sizes_wrong": []})
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


def _break_site(stack: list, model_file: Path | None) -> tuple[str, int]:
    frames = list(stack or [])
    if model_file is not None:
        inside = [f for f in frames if Path(f.filename).resolve() == model_file.resolve()]
        frames = inside or frames
    if not frames:
        return "<unknown>", 0
    return frames[-1].filename, frames[-1].lineno or 0


def _tracing_failure(exc: Exception, seen: list[str], model_file: Path | None
                     ) -> dict[str, Any]:
    """Which custom op and which model-file line a Dynamo failure names, read from its
    message (the FX node it ran and the "from user code" stack)."""
    text = str(exc)
    # Composite ops decompose before a dispatch mode sees them: look them up by name too.
    named = [f"{ns}::{name}" for ns, name in re.findall(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)", text)
             if ns not in BUILTIN_NAMESPACES]
    known = set(torch._C._dispatch_get_all_op_names())
    op = next((n for n in [*seen, *named] if n in known and n.replace("::", ".") in text), None)
    sites = re.findall(r'File "([^"]+)", line (\d+)', text)
    if model_file is not None:
        sites = [s for s in sites if Path(s[0]).resolve() == model_file.resolve()] or sites
    file, line = (sites[-1][0], int(sites[-1][1])) if sites else ("<unknown>", 0)
    cause = re.search(r"got (\w+)\(['\"](.*?)(?:\\n|['\"]\))", text)
    reason = first_line(exc) + (f" ({cause.group(1)}: {cause.group(2)[:160]})" if cause else "")
    return {"op": op, "file": file, "line": line, "reason": reason}


def trace_model(model: torch.nn.Module, inputs_by_size: dict[int, tuple],
                model_file: Path | None = None) -> TraceReport:
    """Run torch._dynamo.explain over the largest size, and the eager step at every size
    under a recorder whose calls cross-check the fakes."""
    inputs = inputs_by_size[max(inputs_by_size)]
    with torch.no_grad():  # each run gets its own copy: the step mutates its inputs
        # Every distinct custom-op call per size, to find the ops no graph holds and to
        # cross-check their fakes afterwards. torch's CrossRefFakeMode compares the same
        # way, but raises on the first mismatch inside the step (later calls go unchecked).
        recorder = CallRecorder(lambda name: name.split("::", 1)[0] not in BUILTIN_NAMESPACES)
        for size, args in sorted(inputs_by_size.items()):
            recorder.step_size = size
            with recorder:
                model(*clone_tensors(args))
        try:
            explained = torch._dynamo.explain(model)(*clone_tensors(inputs))
        except Exception as exc:  # a hard error inside Dynamo: named, never an internal error
            return TraceReport(graph_count=0, custom_ops_outside_graph=[
                {"op": name, "reason": "tracing failed before any graph"}
                for name in recorder.seen], error=_tracing_failure(exc, recorder.seen,
                                                                    model_file))
    breaks, seen = [], set()
    for br in explained.break_reasons:
        file, line = _break_site(br.user_stack, model_file)
        key = (first_text_line(br.reason), file, line)
        if key not in seen:
            seen.add(key)
            breaks.append(GraphBreak(key[0], file, line))
    in_graph: list[str] = []
    for ops in explained.ops_per_graph:
        for target in ops:
            name = _custom_name(target)
            if name and name not in in_graph:
                in_graph.append(name)
    outside = [name for name in recorder.seen if name not in in_graph]
    meta_missing = {o.dispatcher_name.split(".")[0] for o in list_ops(
        sorted({n.split("::")[0] for n in outside})) if o.meta_kind == MetaKind.MISSING}
    wrong_meta = _wrong_fakes(recorder.records, in_graph)
    where = f" (graph break at {Path(breaks[0].file).name}:{breaks[0].line})" if breaks else ""
    return TraceReport(
        graph_count=explained.graph_count,
        graph_breaks=breaks,
        ops_per_graph=[len(ops) for ops in explained.ops_per_graph],
        custom_ops_in_graph=in_graph,
        custom_ops_outside_graph=[
            {"op": name, "reason": "no meta impl: run `aclcap check-meta`" if name in
             meta_missing else f"runs eagerly between graphs{where}"} for name in outside],
        custom_ops_wrong_meta=wrong_meta,
    )
