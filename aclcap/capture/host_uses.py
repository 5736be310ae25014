"""Where a step's host values meet its ops: every op argument that is a host value (an int,
a float, a list of them: `seq_lens`, a slice end, a scale) and every read of tensor data on
the host (`.tolist()`, `.item()`, `int(t)`), each with its model-file line. A device graph
replays its kernels with the arguments they were captured with, so these are what a graph
freezes.

Recorded by running the step eagerly under a dispatch mode (op calls) and a function mode
(host reads): torch has no record of where an op argument came from, and neither
torch._dynamo.explain nor torch.export says which argument a constant fed. Two draws of the
same size tell host-derived arguments apart from ones fixed by the step's shapes: only
those can differ between them. Never used around a compiled call (a mode makes Dynamo run
eagerly)."""

from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from aclcap._compat import TorchDispatchMode
from aclcap._tensors import clone_tensors
from aclcap.draw_state import restore
from aclcap.frames import is_library
from aclcap.graph.piecewise.split import Site
from aclcap.host_values import is_host_value

# Tensor methods that copy tensor data into a Python value: on a device, a sync that a
# capture refuses; on host memory, a value the graph freezes.
_READS = {torch.Tensor.tolist: "tolist()", torch.Tensor.item: "item()",
          torch.Tensor.__int__: "int()", torch.Tensor.__float__: "float()",
          torch.Tensor.__bool__: "bool()", torch.Tensor.__index__: "an index"}
# Tensors made from Python data inside the step (`torch.tensor(seq_lens)`): their values
# are constants of a graph too.
_FROM_DATA = {"aten::lift_fresh", "aten::lift_fresh_copy"}
_DATA_LIMIT = 1024  # elements of such a tensor kept for comparison


@dataclass
class OpCall:
    """One op call and its host-valued arguments, by schema name."""

    op: str  # ns::name, the overload left out (as the user wrote it)
    args: dict[str, Any]
    site: Site | None


@dataclass
class HostRead:
    what: str  # "tolist()", "item()", ...
    site: Site | None  # the model-file line the read came through
    value: Any
    made_at: Site | None = None  # the innermost frame outside torch: the line that read

    @property
    def reader(self) -> Site | None:
        """The line that read (the model line where none other was found)."""
        return self.made_at or self.site

    def where(self) -> str:
        """`lib.py:40 (`code`), through model.py:12`: the line that read, then the model
        line that called it, where they differ."""
        inner = self.reader
        if inner is None:
            return "an unknown line"
        through = f", through {Path(self.site.file).name}:{self.site.line}" \
            if self.site is not None and (self.site.file, self.site.line) != \
            (inner.file, inner.line) else ""
        return inner.text() + through

    def to_dict(self) -> dict[str, Any]:
        """The JSON `host_reads` element: where, not the value (that differs per draw)."""
        made = self.reader
        return {"what": self.what, "file": self.site.file if self.site else None,
                "line": self.site.line if self.site else None,
                "code": self.site.code if self.site else "",
                "made_at": {"file": made.file, "line": made.line, "code": made.code}
                if made else None}


@dataclass(frozen=True)
class DataSized:
    """An op whose output size follows its input's values (`nonzero`, a boolean mask's
    index, `unique`): where a trace fails on a data-dependent size, the size came from one."""

    op: str
    site: Site | None

    def text(self) -> str:
        return f"{self.op} at {self.site.text() if self.site else 'an unknown line'}"


@dataclass
class StepRecord:
    calls: list[OpCall] = field(default_factory=list)
    reads: list[HostRead] = field(default_factory=list)
    sized: list[DataSized] = field(default_factory=list)


def _column(frame: Any) -> int | None:
    """Where on its line the call a frame is making ends: Python 3.11 keeps a position per
    instruction (two bytes each), so calls sharing a line are told apart (the end, since a
    chain `x.view(...).reshape(...)` starts all its calls at `x`)."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    return positions[index][3] if 0 <= index < len(positions) else None


def _sites(model_file: Path | None) -> tuple[Site | None, Site | None]:
    """(the innermost frame of the model file on the stack, else the innermost frame outside
    torch and aclcap: the line the user wrote; the innermost frame outside torch and aclcap:
    the line that made the call, a library's the model calls included)."""
    frame = sys._getframe(2)
    inner = None
    while frame is not None:
        name = frame.f_code.co_filename
        in_model = model_file is not None and name == str(model_file)
        if in_model or (inner is None and not is_library(name)):
            here = Site(name, frame.f_lineno, linecache.getline(name, frame.f_lineno).strip(),
                        _column(frame))
            if in_model:
                return here, inner or here
            inner = here
        frame = frame.f_back
    return inner, inner


def _sized_by_data(func: Any, args: tuple) -> bool:
    """The op's output size follows its input's values: torch tags such ops, and tags
    `index` too, which is one only with a boolean mask among its indices."""
    if torch.Tag.dynamic_output_shape not in func.tags:
        return False
    if func._schema.name != "aten::index":
        return True
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
               for i in (args[1] if len(args) > 1 else ()))


def _host_args(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    schema = func._schema
    values: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        value = kwargs.get(arg.name, args[i] if i < len(args) else None)
        if value is not None and not isinstance(value, torch.Tensor) and is_host_value(value):
            values[arg.name] = list(value) if isinstance(value, tuple) else value
    return values


class _Recorder(TorchDispatchMode):
    """Op calls with their host-valued arguments; a kernel's own inner calls and host reads
    (a Python kernel reading its tensor arguments) are the kernel's, not the step's; so are
    the aten ops a torch function given no host value runs (einsum's views and permutes:
    their sizes are its own, not values the step holds)."""

    def __init__(self, record: StepRecord, model_file: Path | None) -> None:
        super().__init__()
        self.record, self.model_file = record, model_file
        self.inside = 0
        # per torch function being called (innermost last): whether it was given a host value
        self.given_host: list[bool] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        name = func._schema.name
        internal = bool(self.given_host) and not self.given_host[-1]
        values = {} if internal else _host_args(func, args, kwargs)
        site = _sites(self.model_file)[0] if values or name in _FROM_DATA else None
        self.inside += 1
        try:
            out = func(*args, **kwargs)
        finally:
            self.inside -= 1
        if name in _FROM_DATA and isinstance(out, torch.Tensor) \
                and out.numel() <= _DATA_LIMIT:
            name, values = "torch.tensor", {"data": out.tolist()}
        if values:
            self.record.calls.append(OpCall(name, values, site))
        if not self.inside and _sized_by_data(func, args):
            found = DataSized(name, _sites(self.model_file)[0])
            if found not in self.record.sized:
                self.record.sized.append(found)
        return out


class _Reads(TorchFunctionMode):
    def __init__(self, record: StepRecord, recorder: _Recorder) -> None:
        super().__init__()
        self.record, self.recorder = record, recorder

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        given = self.recorder.given_host
        given.append(any(map(is_host_value, (*args, *kwargs.values()))))
        try:
            out = func(*args, **kwargs)
        finally:
            given.pop()
        what = _READS.get(func)
        if what is not None and not self.recorder.inside:
            site, made_at = _sites(self.recorder.model_file)
            self.record.reads.append(HostRead(what, site, out, made_at))
        return out


def record_step(model: torch.nn.Module, args: tuple, model_file: Path | None) -> StepRecord:
    """Run the step eagerly on a copy of `args` and record its host values' uses. The
    model's buffers are put back as they were (a KV cache it owns is written)."""
    record = StepRecord()
    restore(args)
    resolved = model_file.resolve() if model_file is not None else None
    buffers = dict(model.named_buffers())
    before = {name: b.clone() for name, b in buffers.items()}
    recorder = _Recorder(record, resolved)
    try:
        with torch.no_grad(), recorder, _Reads(record, recorder):
            model(*clone_tensors(args))
    finally:
        for name, b in buffers.items():
            b.copy_(before[name])
    return record


def aligned(first: list[OpCall], second: list[OpCall]) -> list[tuple[OpCall, OpCall]]:
    """Pairs of the same call in two records: by position where both called the same ops
    in the same order, else by each op's n-th call."""
    if [c.op for c in first] == [c.op for c in second]:
        return list(zip(first, second, strict=True))
    nth: dict[tuple[str, int], OpCall] = {}
    counts: dict[str, int] = {}
    for call in second:
        counts[call.op] = counts.get(call.op, 0) + 1
        nth[(call.op, counts[call.op])] = call
    pairs, counts = [], {}
    for call in first:
        counts[call.op] = counts.get(call.op, 0) + 1
        if (match := nth.get((call.op, counts[call.op]))) is not None:
            pairs.append((call, match))
    return pairs
