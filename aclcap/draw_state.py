"""State a model file's `make_inputs` sets outside what it returns: vLLM's forward context
(attention metadata put on a module-level object before the step, read by an op inside it).

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
import types
from collections import OrderedDict
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


def snapshot(namespace: dict[str, Any]) -> dict[str, tuple[Any, Any, dict | None]]:
    """Per global of the model file: its value, its contents, and its attributes' (value,
    contents) where it is an object holding state."""
    taken = {}
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


def changes(namespace: dict[str, Any], before: dict[str, tuple[Any, Any, dict | None]]
            ) -> list[StateChange]:
    """What make_inputs set since `before`: globals rebound or changed in place, and
    attributes set on (or changed in place in) global objects."""
    found = []
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


def remember(draw: tuple, found: list[StateChange]) -> None:
    """Keep `draw`'s state (nothing where it set none)."""
    if not found:
        return
    _kept[id(draw)] = (draw, found)
    _kept.move_to_end(id(draw))
    while len(_kept) > KEEP:
        _kept.popitem(last=False)


def _state_of(draw: Any) -> list[StateChange]:
    kept = _kept.get(id(draw))
    return kept[1] if kept is not None and kept[0] is draw else []


def sets_state(draw: Any) -> bool:
    """make_inputs set state outside what it returned with `draw`."""
    return bool(_state_of(draw))


def restore(draw: Any) -> None:
    """Put back the state make_inputs set with `draw`, before a run on it."""
    for change in _state_of(draw):
        change.put_back()


def named(draw: Any, value: Any, same: Any) -> str | None:
    """The name of the state `draw` set whose value `same(state, value)` finds equal."""
    return next((c.name for c in _state_of(draw) if same(c.value, value)), None)
