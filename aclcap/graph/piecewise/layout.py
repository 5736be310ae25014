"""Input layouts of a graph piece's artifact. AOTInductor compiles a program for the strides
of its example inputs and never checks them when it runs: handed a strided view of a step
input (a layer's row of the KV cache, `cache[:, 0]`) after an export on a contiguous copy,
it reads and writes that view as if it were contiguous, so its writes land in other rows
of the buffer the splitting op reads. Pieces are therefore exported on copies in their
inputs' own layouts, and each size's static buffers are checked against the strides the
artifact assumes at that size."""

from __future__ import annotations

import sympy
import torch

from aclcap._compat import has_internal_overlap


def same_layout(t: torch.Tensor) -> torch.Tensor:
    """A copy with `t`'s strides (a clone of a non-dense view is contiguous); a tensor whose
    elements overlap (an expanded one) cannot be written in its layout: a contiguous copy."""
    if has_internal_overlap(t):
        return t.clone(memory_format=torch.contiguous_format)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def program_inputs(exported: torch.export.ExportedProgram) -> list[torch.Tensor]:
    """The fake values of the program's user inputs, in order: their strides are the ones
    the artifact assumes, as expressions of the size symbols."""
    user = set(exported.graph_signature.user_inputs)
    return [n.meta["val"] for n in exported.graph.nodes
            if n.op == "placeholder" and n.name in user]


def _expr(value: int | torch.SymInt) -> sympy.Expr:
    return value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(value)


def _bind(expr: sympy.Expr, actual: int, bindings: dict[sympy.Symbol, sympy.Integer]) -> None:
    """The size symbol of a dim `a * s + b` (what a piece's dims are: `_dim`) from its value."""
    if len(expr.free_symbols) != 1:
        return
    sym = next(iter(expr.free_symbols))
    a, b = expr.coeff(sym), expr.subs(sym, 0)
    if a.is_Integer and b.is_Integer and a != 0 and sympy.expand(expr - a * sym - b) == 0:
        bindings[sym] = sympy.Integer((actual - int(b)) // int(a))


def expected_strides(fakes: list[torch.Tensor], args: tuple) -> list[tuple[int, ...] | None]:
    """Per input, the strides the artifact assumes for these inputs' sizes (None: a stride
    that no size determines, left as it is)."""
    bindings: dict[sympy.Symbol, sympy.Integer] = {}
    for fake, arg in zip(fakes, args, strict=True):
        for size, actual in zip(fake.shape, arg.shape, strict=True):
            _bind(_expr(size), actual, bindings)
    strides: list[tuple[int, ...] | None] = []
    for fake in fakes:
        exprs = [_expr(s).xreplace(bindings) for s in fake.stride()]
        strides.append(tuple(int(e) for e in exprs) if all(e.is_Integer for e in exprs)
                       else None)
    return strides


def in_layout(t: torch.Tensor, strides: tuple[int, ...] | None, copy: bool = False
              ) -> torch.Tensor:
    """`t` itself (`copy`: a copy of it) where the artifact reads it in its own layout, else
    a copy laid out as the artifact assumes (refreshed before and written back after every
    replay, as a splitting op's output is)."""
    if strides is None or all(n == 1 or a == b for n, a, b in
                              zip(t.shape, t.stride(), strides, strict=True)):
        return same_layout(t) if copy else t  # the stride of a dim of size 1 is never used
    return torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device).copy_(t)
