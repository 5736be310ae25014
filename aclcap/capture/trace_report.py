"""What the trace found, as capture reports it and its trace cache keeps it: apart from the
tracing itself (capture/trace.py), whose imports (Dynamo, the fake checks) a warm capture
that finds its trace cached never needs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aclcap.graph.compiles import Compile


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceReport:
        """A report as to_dict wrote it (capture's trace cache)."""
        return cls(**{**data, "graph_breaks": [GraphBreak(**b) for b in data["graph_breaks"]],
                      "recompiles": [Compile(**c) for c in data["recompiles"]]})


