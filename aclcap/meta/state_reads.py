"""Which custom ops read the state make_inputs sets outside the step's inputs (vLLM's forward
context): their Python kernels, and the functions those name, followed a few calls down.
Read from the code, never by running it: an op run beside another draw's state can corrupt
the heap (vLLM's attention does). On cpu such an op reads the state live at every replay; a
device graph freezes what it read at capture unless the state lives in persistent buffers,
so capture names these ops. A C++ kernel's reads cannot be seen and are not claimed."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from aclcap._compat import custom_op_def, custom_op_functions
from aclcap.draw_state import StateChange
from aclcap.meta.op_sources import functions, global_names
from aclcap.meta.registrations import kernels

# Calls followed below a kernel: vLLM's attention op reaches its context in two
# (unified_attention_with_output -> get_attention_context -> get_forward_context).
MAX_DEPTH = 4


def _kernels(op: str) -> list[Callable[..., Any]]:
    definition = custom_op_def(op)
    own = [f for f in custom_op_functions(definition) if f is not None] if definition else []
    return own + kernels(op)


def _called(fn: types.FunctionType, names: set[str]) -> Iterator[Any]:
    """What the function's global names hold, and the attributes of the modules among them
    that it names (`forward_context.get_forward_context`)."""
    found = [fn.__globals__.get(n) for n in names]
    for value in found:
        yield value
        if isinstance(value, types.ModuleType):
            yield from (getattr(value, n, None) for n in names)


def _reads(fn: types.FunctionType, names: set[str], change: StateChange) -> bool:
    """Whether `fn` (whose global names are `names`) reads `change`'s key of its owner."""
    if change.key not in names:
        return False
    if isinstance(change.owner, dict):  # a module global, named in its own module
        return fn.__globals__ is change.owner
    return any(value is change.owner for value in _called(fn, names))


def reader_of(op: str, state: Sequence[StateChange]) -> str | None:
    """The name of the first piece of `state` that `op`'s Python kernels read, else None."""
    seen: set[int] = set()
    todo = [(f, 0) for k in _kernels(op) for f in functions(k)]
    while todo:
        fn, depth = todo.pop()
        if id(fn.__code__) in seen or (fn.__module__ or "").startswith("torch"):
            continue
        seen.add(id(fn.__code__))
        names = set(global_names(fn.__code__))  # once per function, for every check below
        for change in state:
            if _reads(fn, names, change):
                return change.name
        if depth < MAX_DEPTH:
            todo += [(f, depth + 1) for v in _called(fn, names)
                     if isinstance(v, types.FunctionType) for f in functions(v)]
    return None


def state_readers(ops: Sequence[str], state: Sequence[StateChange]) -> dict[str, str]:
    """op -> the state it reads, for each op whose Python kernels read any of `state`."""
    found = {op: reader_of(op, state) for op in ops} if state else {}
    return {op: name for op, name in found.items() if name}
