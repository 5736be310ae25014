"""Fake against real: run an op's fake impl on fake copies of one call's arguments and compare
every output's shape, dtype, strides and storage offset with what the real kernel returned
(aliasing is opcheck's test_faketensor, which check-meta runs on every sample). check-meta runs
it per sample; capture's trace runs it on every custom-op call of a real step.

The fake runs under a ShapeEnv that allows data-dependent output sizes
(`ctx.new_dynamic_size()`, an unbacked SymInt), as torch.compile runs it; each such dim is
bound to the size the kernel gave (within the range the fake declared) and everything else
is compared exactly. Input sizes stay static: this check is about one call's values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from aclcap._compat import fake_tensor_mode, tree_flatten, tree_map_only
from aclcap._tensors import describe
from aclcap.errors import first_line


@dataclass
class FakeComparison:
    """Why the fake disagrees (empty: it agrees), and its data-dependent output dims
    ("dim 0 of output 0")."""

    reasons: list[str] = field(default_factory=list)
    data_dependent: list[str] = field(default_factory=list)


def run_fake(op: Any, args: tuple, kwargs: dict) -> tuple[Any, ShapeEnv]:
    """The fake's outputs for fake copies of the arguments (static sizes), and the ShapeEnv
    holding any data-dependent size it asked for. Raises what the fake raises."""
    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=True)
    with fake_tensor_mode(shape_env=shape_env, static_shapes=True) as mode:
        fake_args, fake_kwargs = tree_map_only(torch.Tensor, mode.from_tensor, (args, kwargs))
        return op(*fake_args, **fake_kwargs), shape_env


def data_dependent_dims(fake: Any) -> list[str]:
    """Output dims whose size the fake left to the data (unbacked), as "dim d of output i"."""
    leaves, _ = tree_flatten(fake)
    return [f"dim {d} of output {i}" for i, f in enumerate(leaves)
            if isinstance(f, torch.Tensor)
            for d, s in enumerate(f.shape) if isinstance(s, torch.SymInt)]


def _value(size: Any, bound: dict[sympy.Symbol, int]) -> int | None:
    """A size or stride as an int, data-dependent symbols replaced by their bound values;
    None if one is still unbound."""
    if not isinstance(size, torch.SymInt):
        return int(size)
    expr = sympy.sympify(size.node.expr.xreplace(bound))
    return int(expr) if expr.is_number else None


def _bind(f: torch.Tensor, r: torch.Tensor, shape_env: ShapeEnv,
          bound: dict[sympy.Symbol, int]) -> str | None:
    """Bind each data-dependent dim of fake output `f` that is a bare symbol to the real
    size; a reason if the real size is outside the range the fake declared for it."""
    for d, s in enumerate(f.shape):
        if not (isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol)) \
                or d >= r.dim():
            continue
        symbol, real = s.node.expr, int(r.shape[d])
        bound.setdefault(symbol, real)
        declared = shape_env.var_to_range.get(symbol)
        if declared is not None and not bool(declared.lower <= real <= declared.upper):
            return (f"dim {d} is data-dependent in [{declared.lower}, {declared.upper}] "
                    f"but the kernel gives {real}")
    return None


def same_strides(shape: tuple[int, ...], fake: tuple[int | None, ...],
                 real: tuple[int, ...]) -> bool:
    """Strides agree where they can matter: in dims of size above 1 of a tensor with more
    than one element. A size-1 dim's stride never addresses anything (a view keeps its
    parent's there), so torch compares only these "significant" strides
    (torch._prims_common.check_significant_strides)."""
    return math.prod(shape) <= 1 or all(
        f == r for size, f, r in zip(shape, fake, real, strict=True) if size > 1)


def _describe(f: torch.Tensor, bound: dict[sympy.Symbol, int]) -> str:
    shape = [_value(s, bound) for s in f.shape]
    strides = [_value(s, bound) for s in f.stride()]
    return f"shape {shape} dtype {f.dtype} strides {strides}"


def compare_outputs(where: str, fake: Any, real: Any, shape_env: ShapeEnv | None = None
                    ) -> list[str]:
    """One reason per output whose fake metadata differs from the real one's."""
    fake_leaves, _ = tree_flatten(fake)
    real_leaves, _ = tree_flatten(real)
    if len(fake_leaves) != len(real_leaves):
        return [f"{where} returns {len(fake_leaves)} outputs but the kernel {len(real_leaves)}"]
    reasons = []
    bound: dict[sympy.Symbol, int] = {}
    for i, (f, r) in enumerate(zip(fake_leaves, real_leaves, strict=True)):
        if not isinstance(r, torch.Tensor):
            continue
        if not isinstance(f, torch.Tensor):
            reasons.append(f"{where} output {i} is {type(f).__name__}, the kernel's is a Tensor")
            continue
        outside = _bind(f, r, shape_env, bound) if shape_env is not None else None
        shape = tuple(_value(s, bound) for s in f.shape)
        strides = tuple(_value(s, bound) for s in f.stride())
        if outside:
            reasons.append(f"{where} output {i}: {outside}")
        elif (shape, f.dtype) != (tuple(r.shape), r.dtype) or not same_strides(
                tuple(r.shape), strides, tuple(r.stride())):
            reasons.append(f"{where} output {i}: {_describe(f, bound)}, but the kernel gives "
                           f"{describe(r)}")
        elif _value(f.storage_offset(), bound) != r.storage_offset():
            reasons.append(f"{where} output {i}: storage offset {f.storage_offset()}, but the "
                           f"kernel's is {r.storage_offset()}")
    return reasons


def compare_fake(op: Any, args: tuple, kwargs: dict, real: Any) -> FakeComparison:
    """The op's fake against the real outputs `real` of the same call."""
    try:
        fake, shape_env = run_fake(op, args, kwargs)
    except Exception as exc:
        return FakeComparison([f"fake impl raised {first_line(exc)}"])
    return FakeComparison(compare_outputs("fake impl", fake, real, shape_env),
                          data_dependent_dims(fake))


def fake_mismatches(op: Any, args: tuple, kwargs: dict, real: Any) -> list[str]:
    """Reasons the op's fake disagrees with the real outputs `real` of the same call."""
    return compare_fake(op, args, kwargs, real).reasons
