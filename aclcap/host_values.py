"""Host values among a step's inputs: ints, floats, bools and flat lists or tuples of them,
beside tensors (attention metadata reaches an op this way: `seq_lens` as a Python list).
A device graph replays its kernels' arguments as captured, so every one of these is frozen
into a graph that consumes it; the helpers here keep tensors and host values apart."""

from __future__ import annotations

import inspect
from typing import Any

import torch

_SCALARS = (bool, int, float)


def is_host_value(value: Any) -> bool:
    """An int, float or bool, or a list or tuple of them (empty included)."""
    if isinstance(value, _SCALARS):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, _SCALARS) for v in value)


def host_indices(args: tuple) -> list[int]:
    """Positions of the step inputs that are host values."""
    return [i for i, a in enumerate(args) if not isinstance(a, torch.Tensor)]


def tensors_of(args: tuple) -> tuple:
    """The step's tensors alone, in order: what a compiled artifact takes (host values are
    constants inside it)."""
    return tuple(a for a in args if isinstance(a, torch.Tensor))


def same_value(a: Any, b: Any) -> bool:
    """Equal host values (a list and a tuple of equal items are equal; 1 and True are not)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def same_numbers(a: Any, b: Any) -> bool:
    """Equal as numbers: a list of ints and the float tensor made from it compare equal."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_numbers(x, y) for x, y in zip(a, b, strict=True))
    return isinstance(a, _SCALARS) and isinstance(b, _SCALARS) and float(a) == float(b)


def carries(arg: Any, value: Any) -> bool:
    """An op argument that holds a host input's value: equal to it, or a list equal item by
    item as numbers to a list or tuple input (`[4, 4]` from `(4, 4)`; a bool is no number
    here: a shape `[1, 2]` does not hold `(True, 2)`). Any pair of host values compares: a
    float input beside a list argument is simply not held."""
    if not (is_host_value(arg) and is_host_value(value)):
        return False
    if isinstance(arg, (list, tuple)) and isinstance(value, (list, tuple)):
        return len(arg) == len(value) and all(
            same_value(a, v) or (not isinstance(a, bool) and not isinstance(v, bool)
                                 and float(a) == float(v))
            for a, v in zip(arg, value, strict=True))
    return same_value(arg, value)


def show(value: Any, limit: int = 12) -> str:
    """A host value as a report prints it: floats to 4 digits, a long list cut after
    `limit` items."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        items = [show(v) for v in value[:limit]]
        more = f", ... ({len(value)} items)" if len(value) > limit else ""
        return "[" + ", ".join(items) + more + "]"
    return repr(value)


def input_names(model: torch.nn.Module, count: int) -> list[str]:
    """The step inputs by the names forward gives them (`seq_lens`), else `input N`."""
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params][:count]
    return names + [f"input {i}" for i in range(len(names), count)]
