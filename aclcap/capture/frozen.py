"""Which host values a captured graph froze, and whether a replay went stale on them.

A graph replays with the op arguments it was captured with. Per size, the step is recorded
eagerly (capture/host_uses.py) on the draw the graph was captured on and on each replay's
draw; an argument that differs between two draws of one size came from host values
(shapes are equal), and where a replay differs from eager, those whose values differ from
the capture's are what went stale. In piecewise mode an op that runs eagerly between the
graph pieces (a splitting op) gets its arguments live: reported, but not as frozen."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from aclcap.capture.host_uses import (
    DataSized,
    HostRead,
    OpCall,
    StepRecord,
    aligned,
    record_step,
)
from aclcap.draw_state import named, sets_state
from aclcap.errors import UsageError, last_line
from aclcap.host_values import (
    carries,
    host_indices,
    input_names,
    is_host_value,
    same_numbers,
    same_value,
    show,
    tensors_of,
)

# How to keep a per-step value out of a captured graph, by device: the issue every runtime
# has (vllm-ascend updates captured tasks, vLLM keeps metadata in persistent tensors).
UPDATE = {
    "npu": "update the captured task before each replay (torch.npu.graph_task_update_begin/"
           "end, or NPUGraph.update)",
    "cuda": "keep it in a persistent device buffer the graph reads, filled before each "
            "replay",
    "cpu": "split the step at the op (SPLITTING_OPS, --graph-mode piecewise) so it runs "
           "eagerly between graphs",
}
FIX = "take it as a Tensor argument of the op, or keep it outside the graph and {update}"


def fix_for(device: str) -> str:
    return FIX.format(update=UPDATE.get(device, UPDATE["cuda"]))


@dataclass
class FrozenValue:
    """One op argument fed by host values, at one size (JSON `frozen_values`)."""

    size: int
    op: str
    arg: str
    file: str | None
    line: int | None
    code: str
    source: str  # "input seq_lens", "host read tolist() at m.py:14", "host values"
    captured: Any
    this_step: Any
    changes_result: bool
    frozen: bool  # False: its op runs eagerly between graph pieces, so the value is live

    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}" if self.file else "an unknown line"

    def text(self) -> str:
        if same_value(self.captured, self.this_step):
            values = f"{show(self.captured)} in every draw"
        elif self.frozen:
            values = f"captured {show(self.captured)}, this step {show(self.this_step)}"
        else:
            values = f"{show(self.captured)} at capture, {show(self.this_step)} this step"
        return f"{self.op}({self.arg}) at {self.where()}, from {self.source}: {values}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _key(call: OpCall, arg: str) -> tuple:
    """One call site's argument: two calls of one op on one line (`.reshape(1, 2)` beside
    `.view(-1, 2, 2)`) are two keys; a loop's calls of one site share theirs."""
    site = call.site
    return (call.op, arg, site.file if site else None, site.line if site else None,
            site.column if site else None)


def _varying(first: StepRecord, second: StepRecord) -> set[tuple]:
    """Arguments whose values differ between two records of one size: host-derived."""
    return {_key(a, name) for a, b in aligned(first.calls, second.calls)
            for name in a.args if name in b.args and not same_value(a.args[name], b.args[name])}


def _grouped(pairs: list[tuple[OpCall, OpCall]], keys: set[tuple]
             ) -> dict[tuple, tuple[list, list, OpCall]]:
    """Per (op, argument, line), its values in both records (a line called in a loop holds
    one value per call)."""
    groups: dict[tuple, tuple[list, list, OpCall]] = {}
    for a, b in pairs:
        for name, value in a.args.items():
            key = _key(a, name)
            if key in keys and name in b.args:
                entry = groups.setdefault(key, ([], [], a))
                entry[0].append(value)
                entry[1].append(b.args[name])
    return groups


def _one(values: list) -> Any:
    return values[0] if len(values) == 1 else values


class HostValues:
    """The host values of one step: found once per run, compared per size."""

    def __init__(self, model: torch.nn.Module, model_file: Path, example: tuple,
                 eager_ops: frozenset[str] = frozenset()) -> None:
        self.model, self.model_file = model, model_file
        self.names = input_names(model, len(example))
        self.hosts = host_indices(example)
        self.sets_state = sets_state(example)  # a forward context: compared like inputs
        self.eager_ops = eager_ops  # piecewise: ops run eagerly between pieces
        try:
            record = record_step(model, example, model_file)
        except Exception as exc:  # the step itself fails in eager: nothing to capture
            raise UsageError(f"model file {model_file}: the step raised {last_line(exc)} "
                             "in eager mode on make_inputs' inputs") from exc
        self.reads: list[HostRead] = record.reads
        self.sized: list[DataSized] = record.sized  # where a data-dependent size came from
        self.seen: dict[int, list[Any]] = {i: [example[i]] for i in self.hosts}

    def constants(self) -> dict[str, Any]:
        """Host inputs that were the same in every draw seen: frozen, and safe only while
        callers keep them constant (a size-long list is never constant across sizes)."""
        return {self.names[i]: values[0] for i, values in self.seen.items()
                if all(same_value(v, values[0]) for v in values)}

    def _input_of(self, captured: Any, draw: tuple) -> int | None:
        """The host input an argument's captured value came from, where one holds it."""
        return next((i for i in self.hosts if same_numbers(draw[i], captured) or (
            isinstance(captured, list) and any(same_numbers(draw[i], c) for c in captured))),
            None)

    def _source(self, captured: Any, draw: tuple, record: StepRecord) -> str:
        if (i := self._input_of(captured, draw)) is not None:
            return f"input {self.names[i]}"
        if (name := named(draw, captured, same_numbers)) is not None:
            return f"{name}, set by make_inputs outside its inputs"
        for read in record.reads:
            if same_numbers(read.value, captured):
                return f"host read {read.what} at {read.where()}"
        return "host values"

    def _constant_keys(self, draws: list[tuple], record: StepRecord) -> set[tuple]:
        """Arguments equal to a host list or float input that is the same in every draw
        (an int is left out: equal ints are too often a shape's)."""
        keys = set()
        for i in self.hosts:
            value = draws[0][i]
            if isinstance(value, int) or not is_host_value(value) or \
                    not all(same_value(d[i], value) for d in draws):
                continue
            keys |= {_key(c, name) for c in record.calls for name, v in c.args.items()
                     if carries(v, value)}
        return keys

    def at_size(self, size: int, captured: tuple, draws: list[tuple], ok: list[bool],
                alone: dict[int, bool] | None = None) -> list[FrozenValue]:
        """Every host-fed argument at this size: captured vs each replay's draw, the first
        replay it differs in (a failing one first), or its value in every draw. `alone`:
        per host input, whether a replay with only that input changed differs from eager;
        an argument fed by one of them changes the result only as its input does, so a
        harmless value is never blamed beside a harmful one."""
        alone = alone or {}
        for i in self.hosts:
            self.seen[i] += [captured[i], *(d[i] for d in draws)]
        at_capture = record_step(self.model, captured, self.model_file)
        records = [record_step(self.model, d, self.model_file) for d in draws]
        same_size = [a.shape for a in tensors_of(captured)] == \
            [a.shape for a in tensors_of(draws[0])]
        pairs = itertools.pairwise([at_capture, *records] if same_size else records)
        keys = set().union(*(_varying(a, b) for a, b in pairs))
        keys |= self._constant_keys([captured, *draws], at_capture)
        found: dict[tuple, FrozenValue] = {}
        for i in sorted(range(len(draws)), key=lambda i: ok[i]):
            for key, (was, now, call) in _grouped(aligned(at_capture.calls, records[i].calls),
                                                  keys).items():
                if key in found and not same_value(found[key].captured, found[key].this_step):
                    continue
                differs = not same_value(was, now)
                if key in found and not differs:
                    continue
                source = self._input_of(_one(was), captured)
                harmful = alone.get(source, not ok[i]) if source is not None else not ok[i]
                found[key] = FrozenValue(
                    size, call.op, key[1], key[2], key[3], call.site.code if call.site else "",
                    self._source(_one(was), captured, at_capture), _one(was), _one(now),
                    differs and harmful, call.op not in self.eager_ops)
        return sorted(found.values(), key=lambda f: (not f.frozen, "::" not in f.op
                                                     or f.op.startswith("aten::"), f.line or 0))


def stale_reasons(frozen: list[FrozenValue], device: str) -> list[str]:
    """What a failing row says first: each frozen argument whose value this step differs
    from the capture's, and the fix once."""
    stale = [f for f in frozen if f.frozen and f.changes_result]
    if not stale:
        return []
    return [f"frozen at capture: {f.text()}" for f in stale] + [
        f"a graph replays the values it was captured with: {fix_for(device)}"]


def read_reason(read: HostRead, device: str) -> str:
    """A host read inside a step that is captured whole; a read that decides a branch gets
    the branch's fix."""
    where = f" at {read.where()}"
    code = read.reader.code.lstrip() if read.reader else ""
    if read.what == "bool()" or code.startswith(("if ", "elif ", "while ", "assert ")):
        return (f"the step branches on a tensor's values{where}, read on the host "
                f"({read.what}): make the branch a torch.cond, or move it out of the step "
                "(decide before the step and pass the result in)")
    return (f"reads tensor data on the host ({read.what}){where}: the value cannot live in a "
            f"graph (a device capture refuses the sync, or freezes the value it read); "
            f"{fix_for(device)}")
