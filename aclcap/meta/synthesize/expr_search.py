"""The smallest integer expression that gives an output dim in every observed call.

Terms are input dims, numels, int arguments, elements of int[] arguments and constants;
operations `+ - *` and floor or ceil division by a constant, an int argument or a dim
(`numel // x.shape[-1]`), never by a formula: nested divisions fit anything. Expressions
are enumerated by size (a term is 1, `a op b` is 1 + size(a) + size(b)) up to MAX_SIZE,
each as its vector of values over the calls; two expressions with the same vector are the
same to the data, so only the first (the preferred) of each is kept, which keeps the
search a few numpy array operations per size. torch's own sympy machinery solves guards,
not this inverse problem, so it is written here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aclcap.meta.observe import ObservedCall
from aclcap.meta.synthesize.rules import BinOp, Const, Dim, Expr, IntArg, Numel

MAX_SIZE = 5  # (numel + 1) // 2 is size 5; bigger fits few observations too easily
CONSTANTS = (1, 2, 3, 4, 8, 16, 32, 64, 128, 256)
LIMIT = 1 << 48  # values past this are no size: dropped, and no overflow in int64
_OPS = ("*", "//", "ceil//", "+", "-")  # preference order at equal size


@dataclass(frozen=True)
class Term:
    expr: Expr
    values: tuple[int, ...]


def _dim_index(d: int, rank: int) -> int:
    """Name a dim as people do: the last one as -1 (`x.shape[-1]`), the others from 0."""
    return -1 if rank > 1 and d == rank - 1 else d


def terms(calls: Sequence[ObservedCall]) -> list[Term]:
    """Every term defined in all `calls`, in order of preference: input dims, int
    arguments, int[] elements, numels. Tensors whose rank differs between calls offer
    both dims from the front and from the back, as far as every call has them."""
    found: list[Term] = []

    def add(expr: Expr, values: list[int | None]) -> None:
        if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            found.append(Term(expr, tuple(values)))  # type: ignore[arg-type]

    first = calls[0]
    numels = []
    for arg in first.args:
        name = arg.name
        facts = [c.arg(name) for c in calls]
        if all(f.tensor is not None for f in facts):
            ranks = {f.tensor.shape.__len__() for f in facts}
            low = min(ranks)
            indexes = ([_dim_index(d, low) for d in range(low)] if len(ranks) == 1 else
                       [*range(low), *range(-1, -low - 1, -1)])
            for i in indexes:
                add(Dim(name, i), [f.tensor.shape[i] for f in facts])
            if max(ranks) > 1:
                numels.append((Numel(name), [f.tensor.numel for f in facts]))
        elif all(f.tensors is not None for f in facts) and \
                len({len(f.tensors) for f in facts}) == 1:
            for item in range(len(first.arg(name).tensors)):
                shapes = [f.tensors[item].shape for f in facts]
                if len({len(s) for s in shapes}) == 1:
                    rank = len(shapes[0])
                    for d in range(rank):
                        add(Dim(name, _dim_index(d, rank), item), [s[d] for s in shapes])
        elif all(isinstance(f.value, int) and not isinstance(f.value, bool) for f in facts):
            add(IntArg(name), [f.value for f in facts])
        elif all(isinstance(f.value, list) for f in facts) and \
                len({len(f.value) for f in facts}) == 1:
            for i in range(len(first.arg(name).value)):
                add(IntArg(name, i), [f.value[i] for f in facts])
    for expr, values in numels:
        add(expr, values)
    return found


def _apply(op: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a op b elementwise over broadcast rows, and which rows are valid sizes everywhere."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if op == "+":
            out = a + b
        elif op == "-":
            out = a - b
        elif op == "*":
            out = a * b
        else:
            safe = np.where(b > 0, b, 1)
            out = a // safe if op == "//" else -((-a) // safe)
    ok = (out >= 0) & (out < LIMIT)
    if op in ("//", "ceil//"):
        ok &= np.broadcast_to(b > 0, out.shape)
    return out, ok.all(axis=-1)


def _level(left: list[tuple[Expr, np.ndarray]], right: list[tuple[Expr, np.ndarray]],
           seen: set[bytes], symmetric: bool, want: np.ndarray | None = None
           ) -> list[tuple[Expr, np.ndarray]]:
    """Every `l op r` with a new value vector, in preference order (op, then l, then r);
    with `want`, only the first that equals it (the last size needs nothing else)."""
    if not left or not right:
        return []
    lv = np.stack([v for _, v in left])[:, None, :]
    rv = np.stack([v for _, v in right])[None, :, :]
    made = []
    divisors = np.array([isinstance(e, (Const, IntArg, Dim)) for e, _ in right])
    for op in _OPS:
        out, ok = _apply(op, lv, rv)
        if op in ("//", "ceil//"):
            ok &= divisors[None, :]  # by a constant, an int argument or a dim, never a formula
        if symmetric and op in ("+", "*"):
            ok &= np.triu(np.ones(ok.shape, dtype=bool))  # a op b == b op a
        if want is not None:
            ok &= (out == want).all(axis=-1)
        for i, j in zip(*np.nonzero(ok), strict=True):
            vec = out[i, j]
            key = vec.tobytes()
            if key not in seen:
                seen.add(key)
                made.append((BinOp(op, left[i][0], right[j][0]), vec))
                if want is not None:
                    return made
    return made


def search(target: Sequence[int], available: Sequence[Term]) -> Expr | None:
    """The smallest expression whose values over the calls are `target`, or None."""
    want = np.asarray(target, dtype=np.int64)
    constant = len(set(target)) == 1
    atoms: list[tuple[Expr, np.ndarray]] = []
    if constant and target[0] in (0, 1):
        atoms.append((Const(int(target[0])), want.copy()))
    atoms += [(t.expr, np.asarray(t.values, dtype=np.int64)) for t in available]
    atoms += [(Const(c), np.full(len(target), c, dtype=np.int64)) for c in CONSTANTS]
    if constant and target[0] not in CONSTANTS:
        atoms.append((Const(int(target[0])), want.copy()))
    seen: set[bytes] = set()
    levels: dict[int, list[tuple[Expr, np.ndarray]]] = {1: []}
    for expr, vec in atoms:
        if vec.tobytes() not in seen:
            seen.add(vec.tobytes())
            levels[1].append((expr, vec))
            if np.array_equal(vec, want):
                return expr
    for size in range(3, MAX_SIZE + 1, 2):
        last = size + 2 > MAX_SIZE
        levels[size] = []
        for left_size in range(1, size - 1, 2):
            right_size = size - 1 - left_size
            made = _level(levels[left_size], levels[right_size], seen,
                          symmetric=left_size == right_size, want=want if last else None)
            for expr, vec in made:
                if np.array_equal(vec, want):
                    return expr
            levels[size] += made
    return None


def evaluate(expr: Expr, call: ObservedCall) -> int:
    """The value of `expr` in `call`, as the emitted code computes it."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Dim):
        arg = call.arg(expr.arg)
        facts = arg.tensor if expr.item is None else arg.tensors[expr.item]
        return facts.shape[expr.index]
    if isinstance(expr, Numel):
        arg = call.arg(expr.arg)
        return (arg.tensor if expr.item is None else arg.tensors[expr.item]).numel
    if isinstance(expr, IntArg):
        value = call.arg(expr.arg).value
        return value if expr.index is None else value[expr.index]
    a, b = evaluate(expr.left, call), evaluate(expr.right, call)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else -1,
            "ceil//": -(-a // b) if b else -1}[expr.op]


def size(expr: Expr) -> int:
    return 1 + size(expr.left) + size(expr.right) if isinstance(expr, BinOp) else 1
