"""State a model file's `make_inputs` sets outside what it returns: vLLM's forward context
(attention metadata put on a module-level object before the step, read by an op inside it),
on the model file's own globals or on any other module's: vLLM's runner rebinds
`vllm.forward_context._forward_context`, which a model file sets the same way.

aclcap draws several times before it runs (every size first; the replays' draws after the
capture's), so without help the step would read the last draw's metadata beside another
draw's tensors. Each draw's state is therefore taken when it is drawn (the model file's
globals rebound, and attributes set on its global objects) and put back before any run on
that draw. Draws stay plain tuples, which torch's pytree clones tensor by tensor (a tuple
subclass would be a leaf to it, never cloned), so a draw's state is found by identity in a
small table that keeps the latest draws alive, and only draws that set state are kept."""

from __future__ import annotations

import copy
import inspect
import sys
import types
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KEEP = 256  # draws whose state is kept: a capture run makes a few per size


@dataclass(frozen=True)
class StateChange:
    """One value make_inputs set: `owner[key]` (a module's globals) or `owner.key`, named
    as the model file spells it (`CONTEXT.seq_lens`)."""

    owner: Any
    key: str
    value: Any
    name: str

    def put_back(self) -> None:
        value = copy.copy(self.value)  # the step may mutate it: the draw's own stays as drawn
        if isinstance(self.owner, dict):
            self.owner[self.key] = value
        else:
            setattr(self.owner, self.key, value)


_MISSING = object()
_kept: OrderedDict[int, tuple[tuple, list[StateChange]]] = OrderedDict()


def _is_state(value: Any) -> bool:
    """A value a step may read as data: not a module, function, class or torch module."""
    if isinstance(value, types.ModuleType) or inspect.isroutine(value) or \
            inspect.isclass(value):
        return False
    import torch

    return not isinstance(value, torch.nn.Module)


def _contents(value: Any) -> Any:
    """What in-place changes to `value` are compared by: a shallow copy of a list or dict."""
    return copy.copy(value) if isinstance(value, (list, dict)) else None


# Modules whose globals are never a step's state: the interpreter's own, torch's (its
# lazily set caches) and aclcap's. Anything else a draw rebinds is state, vLLM's included.
_NOT_STATE = (*sys.stdlib_module_names, "torch", "aclcap", "_pytest", "pytest", "xdist",
              "execnet", "pluggy", "hypothesis", "typer",
              "rich", "click", "numpy", "sympy")


_modules_seen: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}


def _other_modules(namespace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every loaded module but the model file's and those of `_NOT_STATE`, by name (found
    again only when a module was imported since)."""
    key = (len(sys.modules), id(namespace))
    if key not in _modules_seen:
        _modules_seen.clear()
        _modules_seen[key] = {
            name: vars(m) for name, m in list(sys.modules.items())
            if m is not None and name.partition(".")[0] not in _NOT_STATE
            and getattr(m, "__dict__", None) is not namespace}
    return _modules_seen[key]


_OTHERS = "\0other modules"  # the snapshot's entry of every other module's globals


def snapshot(namespace: dict[str, Any]) -> dict[str, Any]:
    """Per global of the model file: its value, its contents, and its attributes' (value,
    contents) where it is an object holding state; under `_OTHERS`, a copy of every other
    module's globals (a dict copy per module: the values alone, compared by identity, as a
    rebinding is how a library sets such state; 2,800 modules cost ~2 ms)."""
    taken: dict[str, Any] = {_OTHERS: {module: dict(names) for module, names
                                       in _other_modules(namespace).items()}}
    for name, value in namespace.items():
        if name.startswith("__") or not _is_state(value):
            continue
        attrs = {k: (v, _contents(v)) for k, v in vars(value).items()} \
            if hasattr(value, "__dict__") and not isinstance(value, type) else None
        taken[name] = (value, _contents(value), attrs)
    return taken


def _changed(old: tuple[Any, Any], new: Any) -> bool:
    value, contents = old
    return new is not value or (contents is not None and new != contents)


def changes(namespace: dict[str, Any], before: dict[str, Any]) -> list[StateChange]:
    """What make_inputs set since `before`: globals rebound or changed in place, and
    attributes set on (or changed in place in) global objects; of other modules, globals
    that held state and were rebound (a first import's new names are not state)."""
    found = []
    others = before.get(_OTHERS, {})
    for module, names in _other_modules(namespace).items():
        old_names = others.get(module)
        try:  # C's dict comparison: identical values never reach their __eq__
            if old_names is None or names == old_names:
                continue
        except Exception:  # a rebound value whose __eq__ cannot say (a tensor)
            pass
        for name, value in list(names.items()):
            old = old_names.get(name, _MISSING)
            if old is not _MISSING and value is not old and not name.startswith("__") \
                    and _is_state(value):
                found.append(StateChange(names, name, copy.copy(value), f"{module}.{name}"))
    for name, value in namespace.items():
        if name.startswith("__") or not _is_state(value):
            continue
        old = before.get(name)
        if old is None or _changed(old[:2], value):
            found.append(StateChange(namespace, name, copy.copy(value), name))
            continue
        attrs = old[2]
        if attrs is None or not hasattr(value, "__dict__"):
            continue
        for key, now in vars(value).items():
            if key not in attrs or _changed(attrs[key], now):
                found.append(StateChange(value, key, copy.copy(now), f"{name}.{key}"))
    return found


def drawn(fn: Any, namespace: dict[str, Any]) -> Any:
    """`fn()` (make_inputs, or a model file's pad_inputs), with the state it set kept for
    the draw it returns: put back before each run on that draw."""
    before = snapshot(namespace)
    draw = fn()
    if isinstance(draw, tuple):
        remember(draw, changes(namespace, before))
    return draw


def remember(draw: tuple, found: list[StateChange]) -> None:
    """Keep `draw`'s state (nothing where it set none)."""
    if not found:
        return
    _kept[id(draw)] = (draw, found)
    _kept.move_to_end(id(draw))
    while len(_kept) > KEEP:
        _kept.popitem(last=False)


def state_of(draw: Any) -> list[StateChange]:
    kept = _kept.get(id(draw))
    return kept[1] if kept is not None and kept[0] is draw else []


def sets_state(draw: Any) -> bool:
    """make_inputs set state outside what it returned with `draw`."""
    return bool(state_of(draw))


def restore(draw: Any) -> None:
    """Put back the state make_inputs set with `draw`, before a run on it."""
    for change in state_of(draw):
        change.put_back()


def restorer(draw: Any) -> Callable[[], None] | None:
    """A function that puts back the state make_inputs set with `draw` (None where it set
    none): for what outlives the table, an op's samples recorded on that draw."""
    found = list(state_of(draw))
    if not found:
        return None

    def put_back() -> None:
        for change in found:
            change.put_back()
    return put_back


def state_names(draw: Any) -> list[str]:
    """Where the state make_inputs set with `draw` lives (`CONTEXT.seq_lens`,
    `vllm.forward_context._forward_context`)."""
    return [c.name for c in state_of(draw)]


def named(draw: Any, value: Any, same: Any) -> str | None:
    """The name of the state `draw` set whose value `same(state, value)` finds equal."""
    return next((c.name for c in state_of(draw) if same(c.value, value)), None)
