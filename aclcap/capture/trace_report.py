"""What the trace found, as capture reports it and its trace cache keeps it: apart from the
tracing itself (capture/trace.py), whose imports (Dynamo, the fake checks) a warm capture
that finds its trace cached never needs."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aclcap.capture.advice import as_typed, fakes_advice, where
from aclcap.graph.compiles import Compile

# A tracing failure that a value read on the host leads to: the read is traced (into an
# unbacked size) and the failure comes where that size meets a guard, a line later. A
# constraint violation is one only where it names an unbacked size (u0): otherwise the step
# pinned its own token count (`if x.shape[0] == 8`), which no host read explains (issue 50).
_DATA_DEPENDENT = re.compile(r"data.dependent|DataDependent|unbacked", re.IGNORECASE)
_UNBACKED = re.compile(r"\bu\d+\b")
NO_META = "no fake impl"  # a custom op's reason outside any graph (advice.py says the fix)
# What a custom op the trace checked gets wrong, by its `defect` (trace._wrong_fakes).
WRONG = {"meta": "has a wrong meta impl", "schema": "returns a view its schema does not declare"}


# Dynamo's graph-break reason for an op whose output size follows its input's values
# (`nonzero`): no data-dependent guard is named, but what follows the break is the data's.
DYNAMIC_SHAPE = "Dynamic shape operator"


def breaks_on_values(reason: str) -> bool:
    """A graph break on tensor values: a data-dependent one, or a dynamic-shape op's."""
    return data_dependent(reason) or DYNAMIC_SHAPE in reason


def data_dependent(reason: str) -> bool:
    """A trace failure that a value read on the host leads to."""
    return bool(_DATA_DEPENDENT.search(reason)) or (
        "Constraints violated" in reason and bool(_UNBACKED.search(reason)))


@dataclass
class GraphBreak:
    reason: str
    file: str
    line: int
    # Every frame of the break's user stack, [file, line], outermost first: a host read made
    # in a library the model calls (transformers' mask helpers) breaks there, not at the
    # model line.
    frames: list[list] = field(default_factory=list)


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
    # Where the step pins its own size, which a required dynamic size refused (file, line,
    # reason, as `error`): the step was traced with its size only suggested dynamic.
    size_pinned: dict[str, Any] | None = None

    def error_line(self) -> str | None:
        """The failure in one line, with the op, the model line and what to run next."""
        if self.error is None:
            return None
        e = self.error
        op = f"{e['op']} " if e["op"] else ""
        where = f" at {Path(e['file']).name}:{e['line']}" if e["line"] else ""
        text = f"torch.compile cannot trace the step: {op}fails{where}: {e['reason']}" \
            if op or where else f"torch.compile cannot trace the step: {e['reason']}"
        if not e["op"]:  # no op to blame: nothing for check-meta to check
            return text
        model = e.get("model") or "MODEL.py"
        if e["op"] in (missing := self.missing_fakes()):  # every op of the step without one
            return f"{text}; {fakes_advice(model, missing)}"
        return f"{text}; run `aclcap check-meta --namespace {e['op'].split('::')[0]} " \
            f"--samples-from {as_typed(model)}`"

    def missing_fakes(self) -> list[str]:
        """The custom ops of the step with no fake impl, in the order the step called them."""
        return [o["op"] for o in self.custom_ops_outside_graph if o["reason"] == NO_META]

    def outside_reasons(self) -> list[str]:
        """A line per custom op left outside every graph, with the line that calls it."""
        return [f"{o['op']} runs outside any graph"
                + (f", called at {where(o['file'], o['line'])}" if o.get("line") else "")
                + f": {o['reason']}" for o in self.custom_ops_outside_graph]

    def passes_through(self, file: str, line: int) -> bool:
        """Whether a graph break or the tracing failure has `file:line` on its user stack:
        what decides that a host read seen in the eager step is made by the compiled step
        too (libraries skip host reads while compiling, `torch.compiler.is_compiling()`)."""
        stacks = [b.frames or [[b.file, b.line]] for b in self.graph_breaks]
        if self.error is not None:
            stacks.append(self.error.get("frames") or [[self.error["file"], self.error["line"]]])
        where = (str(Path(file).resolve()), line)
        return any((str(Path(f).resolve()), n) == where for stack in stacks for f, n in stack)

    def makes_read(self, file: str, line: int) -> bool:
        """Whether the traced step makes a host read the eager step made at `file:line`: a
        graph break or the tracing failure passes through that line, or the tracing failed
        on a data-dependent value (its line is the consumer's, not the read's)."""
        return self.passes_through(file, line) or (self.error is not None and (
            self.error.get("data_dependent", False) or data_dependent(self.error["reason"])))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceReport:
        """A report as to_dict wrote it (capture's trace cache)."""
        return cls(**{**data, "graph_breaks": [GraphBreak(**b) for b in data["graph_breaks"]],
                      "recompiles": [Compile(**c) for c in data["recompiles"]]})


