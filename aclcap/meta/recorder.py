"""The one mode that records custom-op calls as a model runs: check-meta's harvest
(`--samples-from`, build and step) and capture's fake cross-check both read calls through
it, as `RecordedCall`s with one dedup rule: `ObservedCall.key()`, plus the step size where
the caller sets one (the trace reports a wrong fake per size).

A TorchFunctionMode, not a dispatch mode: it sees an op as the model calls it, C++
composites (CompositeImplicitAutograd) included, where a dispatch mode sees only the aten
ops they decompose into; both callers want the op the model named. What it cannot see is a
custom op called from inside another op's C++ body, which no model line names either."""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch.overrides import TorchFunctionMode

from aclcap._compat import OpOverload, OpOverloadPacket
from aclcap._tensors import clone_tensors
from aclcap.frames import user_line
from aclcap.meta.observe import STEP, RecordedCall, observed_inputs, record


def as_overload(func: Any) -> OpOverload | None:
    """The overload a TorchFunctionMode was handed: packets (`torch.ops.ns.op(...)`) mean
    their default overload, or their only one."""
    if isinstance(func, OpOverload):
        return func
    if isinstance(func, OpOverloadPacket):
        names = func.overloads()
        return getattr(func, "default" if "default" in names else names[0]) if names else None
    return None


class CallRecorder(TorchFunctionMode):
    """Records every distinct call of an op whose `ns::name` `wants` accepts. Set `phase`
    (build or step), `step_size` and `setup` (SampleInput.setup) between runs;
    `max_per_op` caps the records per overload (harvest keeps a few samples, the trace
    all). `seen` lists the ops called, in order."""

    def __init__(self, wants: Callable[[str], bool], site_file: Path | None = None,
                 max_per_op: int | None = None) -> None:
        super().__init__()
        self.wants, self.max_per_op = wants, max_per_op
        self.site_file = str(site_file) if site_file else None
        self.phase = STEP
        self.step_size: int | None = None
        self.setup: Callable[[], None] | None = None  # puts back the running draw's state
        self.records: list[RecordedCall] = []
        self.seen: list[str] = []
        self.lines: dict[str, tuple[str, int]] = {}  # op -> the user line of its first call
        self._keys: set[tuple] = set()
        self._per_op: Counter[str] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = as_overload(func)
        if op is None or not self.wants(op._schema.name):
            return func(*args, **kwargs)
        if op._schema.name not in self.seen:
            self.seen.append(op._schema.name)
            if (line := user_line()) is not None:
                self.lines[op._schema.name] = line
        key = (observed_inputs(op, args, kwargs).key(), self.step_size)
        full = self.max_per_op is not None and self._per_op[key[0][0]] >= self.max_per_op
        if key in self._keys or full:
            return func(*args, **kwargs)
        self._keys.add(key)
        self._per_op[key[0][0]] += 1
        recorded = record(op, func, tuple(args), kwargs, site=self._site(), phase=self.phase)
        out, recorded.outputs = recorded.outputs, clone_tensors(recorded.outputs)
        recorded.step_size = self.step_size
        recorded.sample.setup = self.setup
        self.records.append(recorded)
        return out

    def _site(self) -> str:
        """`model.py:33`: the innermost line of the model file on the stack."""
        if self.site_file is None:
            return ""
        frames = [f for f in traceback.extract_stack() if f.filename == self.site_file]
        name = Path(self.site_file).name
        return f"{name}:{frames[-1].lineno}" if frames else name
