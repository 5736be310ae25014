"""The smallest integer expression that gives an output dim in every observed call.

Terms are input dims, numels, int arguments, elements of int[] arguments, the itemsize of a
ScalarType argument (or of a tensor whose dtype varies) and constants; operations
`+ - * max min` and floor or ceil division by a constant, an int argument, a dim or an itemsize
(`numel // x.shape[-1]`), never by a formula: nested divisions fit anything. Expressions
are enumerated by size (a term is 1, `a op b` is 1 + size(a) + size(b)) up to MAX_SIZE,
each as its vector of values over the calls; two expressions with the same vector are the
same to the data, so only the first (the preferred) of each is kept, which keeps the
search a few numpy array operations per size.

Past MAX_SIZE, two bounded forms are searched exhaustively before a size is called
data-dependent: an expression of size 3 or less divided (floor or ceil) by a constant
times a term (`(numel + 1) // (2 * itemsize)`), and a sum of up to MAX_MONOMIALS products
of at most two terms with coefficients in COEFFICIENTS plus a constant in
[-MAX_OFFSET, MAX_OFFSET] (`numel + E * (block - 1)`), found by a meet in the middle over
hashed value vectors. Last, packed rows: an expression of size 3 or less, or that times a
term or a pack factor (`8 // bits`), divided by a term, a constant or a pack factor, plus a
constant (`-(-C // (8 // bits)) + 4`). torch's own sympy machinery solves guards, not this
inverse problem, so it is written here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations, product

import numpy as np

from aclcap.meta.observe import ObservedCall
from aclcap.meta.synthesize.rules import (
    BinOp,
    Const,
    Dim,
    Expr,
    IntArg,
    ItemSize,
    ListLen,
    Numel,
)

MAX_SIZE = 5  # (numel + 1) // 2 is size 5; bigger fits few observations too easily
CONSTANTS = (1, 2, 3, 4, 8, 16, 32, 64, 128, 256)
LIMIT = 1 << 48  # values past this are no size: dropped, and no overflow in int64
_OPS = ("*", "//", "ceil//", "+", "-", "max", "min")  # preference order at equal size
MAX_MONOMIALS = 3
COEFFICIENTS = (1, -1, 2, -2)
MAX_OFFSET = 512
SCALES = (1, 2, 4, 8)  # a divisor's constant factor
MAX_ATOMS = 40  # varying terms a sum of products is built from (40 give 860 monomials)
MAX_EXPONENT = 8  # a power's exponent: dims of a pseudo-coordinate, a spline's degree
MAX_BASE = 64
AFFINE_MIN_CALLS = 8
AFFINE_MAX_ATOMS = 10  # C(10, 3) * 4**3 numerators per divisor, each over every offset
AFFINE_OFFSET = 8
PRODUCT_SHIFT = 16  # a packed row's header bytes: fbgemm's n-bit scale and bias are 4
MAX_NUMERATORS = 1 << 16
PACK_WORDS = (8, 32)  # bits in a byte and in an int32 word: n-bit values packed per unit


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
        elif all(isinstance(f.value, str) and _itemsize(f.value) for f in facts):
            add(ItemSize(name), [_itemsize(f.value) for f in facts])
        elif all(isinstance(f.value, list) for f in facts):
            add(ListLen(name), [len(f.value) for f in facts])
            if len({len(f.value) for f in facts}) == 1:
                for i in range(len(first.arg(name).value)):
                    add(IntArg(name, i), [f.value[i] for f in facts])
    for expr, values in numels:
        add(expr, values)
    for arg in first.args:  # a tensor's itemsize, where its dtype varies
        facts = [c.arg(arg.name).tensor for c in calls]
        if all(f is not None for f in facts) and len({f.dtype for f in facts}) > 1:
            add(ItemSize(arg.name, tensor=True), [_itemsize(f.dtype) for f in facts])
    return found


def _itemsize(dtype: str) -> int:
    """Bytes per element of a dtype named as observe.py names it; 0 for no dtype."""
    import torch

    found = getattr(torch, dtype, None)
    return found.itemsize if isinstance(found, torch.dtype) else 0


def _apply(op: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a op b elementwise over broadcast rows, and which rows are valid sizes everywhere."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if op == "+":
            out = a + b
        elif op == "-":
            out = a - b
        elif op == "*":
            out = a * b
        elif op == "max":
            out = np.maximum(a, b)
        elif op == "min":
            out = np.minimum(a, b)
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
    divisors = np.array([isinstance(e, (Const, IntArg, Dim, ItemSize)) for e, _ in right])
    for op in _OPS:
        out, ok = _apply(op, lv, rv)
        if op in ("//", "ceil//"):
            ok &= divisors[None, :]  # by a constant, an int argument or a dim, never a formula
        if symmetric and op in ("+", "*", "max", "min"):
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
    """The smallest expression whose values over the calls are `target`, or None; sums
    written as a person writes them (`x - w + 1`, not `1 + (x - w)`)."""
    found = _search(target, available)
    return None if found is None else simplify(found)


def simplify(expr: Expr) -> Expr:
    """Sums and differences flattened, constants gathered at the end, inside divisions
    too: the same value, the form a person writes."""
    if not isinstance(expr, BinOp):
        return expr
    if expr.op not in ("+", "-"):
        return BinOp(expr.op, simplify(expr.left), simplify(expr.right))
    parts: list[tuple[int, Expr]] = []

    def flatten(e: Expr, sign: int) -> None:
        if isinstance(e, BinOp) and e.op in ("+", "-"):
            flatten(e.left, sign)
            flatten(e.right, sign if e.op == "+" else -sign)
        else:
            parts.append((sign, simplify(e)))

    flatten(expr, 1)
    constant = sum(sign * e.value for sign, e in parts if isinstance(e, Const))
    rest = [(sign, e) for sign, e in parts if not isinstance(e, Const)]
    if not rest:
        return Const(constant)
    rest.sort(key=lambda p: p[0] < 0)
    out: Expr = rest[0][1] if rest[0][0] > 0 else BinOp("-", Const(0), rest[0][1])
    for sign, e in rest[1:]:
        out = BinOp("+" if sign > 0 else "-", out, e)
    if constant:
        out = BinOp("+" if constant > 0 else "-", out, Const(abs(constant)))
    return out


def _search(target: Sequence[int], available: Sequence[Term]) -> Expr | None:
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
    small = [*levels[1], *levels.get(3, [])]
    # A power before a sum of products: where calls vary one input at a time, a polynomial
    # fits (degree + 1) ** D's few values too, and is wrong at the first joint change.
    return _scaled_division(want, small, levels[1]) or _power(want, small, levels[1]) or \
        linear_combination(want, available) or floored_affine(want, available) or \
        _product_division(want, levels.get(3, []), levels[1])


def _scaled_terms(atoms: list[tuple[Expr, np.ndarray]]) -> list[tuple[Expr, np.ndarray]]:
    """`c * t` for c in SCALES and t an int argument, a dim or an itemsize positive in every
    call: the divisors both division forms try."""
    return [(BinOp("*", Const(c), e) if c > 1 else e, v * c) for c in SCALES
            for e, v in atoms if isinstance(e, (IntArg, Dim, ItemSize)) and (v > 0).all()]


def _scaled_division(want: np.ndarray, numerators: list[tuple[Expr, np.ndarray]],
                     atoms: list[tuple[Expr, np.ndarray]]) -> Expr | None:
    """`n // (c * t)` or its ceil, n of size 3 at most, t a term, c in SCALES."""
    divisors = _scaled_terms(atoms)
    if not divisors or not numerators:
        return None
    d = np.stack([v for _, v in divisors])[None, :, :]
    for start in range(0, len(numerators), 256):
        chunk = numerators[start:start + 256]
        n = np.stack([v for _, v in chunk])[:, None, :]
        for op in ("//", "ceil//"):
            out = n // d if op == "//" else -((-n) // d)
            hits = np.argwhere((out == want).all(axis=-1))
            if len(hits):
                i, j = hits[0]
                return BinOp(op, chunk[i][0], divisors[j][0])  # type: ignore[arg-type]
    return None


def _product_division(want: np.ndarray, pairs: list[tuple[Expr, np.ndarray]],
                      atoms: list[tuple[Expr, np.ndarray]]) -> Expr | None:
    """`p // d + k`, its ceil, or `p + k`: p a term, an expression of size 3, or that times
    a term or a pack factor; d a constant, a term, a constant times a term or a pack factor;
    k a constant within PRODUCT_SHIFT. A pack factor `c // bits` (c in PACK_WORDS, bits an
    int argument) is how many values a byte or a word packs: fbgemm's n-bit rows hold
    `ceil(C / (8 // bits)) + 4` bytes and unpack to `(C - 4) * (8 // bits)` values, GPTQ
    packs 32 // bits per int32; a jagged mat-vec is `D * B // (B * H)` wide. Tried past
    floored_affine (one product at most, no coefficient of 8), and with AFFINE_MIN_CALLS
    calls at least: the shift k fits few calls too easily."""
    if len(want) < AFFINE_MIN_CALLS:
        return None
    packs = [(BinOp("//", Const(c), e), c // v) for c in PACK_WORDS for e, v in atoms
             if isinstance(e, IntArg) and (v > 0).all() and (v <= c).all()
             and len(set(v.tolist())) > 1]
    factors = {e for e, _ in packs}
    seen: set[bytes] = set()
    numerators, packed = [], set()  # packed: the products with a pack factor
    for expr, vec in [*atoms, *pairs, *((BinOp("*", e, a), v * av) for e, v in pairs
                                        for a, av in [*atoms, *packs])]:
        key = vec.tobytes()
        if key not in seen and (vec >= 0).all() and (vec < LIMIT).all() \
                and not isinstance(expr, Const):
            seen.add(key)
            numerators.append((expr, vec))
            if isinstance(expr, BinOp) and expr.right in factors:
                packed.add(len(numerators) - 1)
    numerators = numerators[:MAX_NUMERATORS]
    divisors = _scaled_terms(atoms) + [(e, v) for e, v in [*atoms, *packs]
                                       if (isinstance(e, Const) and int(v[0]) > 1)
                                       or e in factors]
    d = np.stack([v for _, v in divisors])[None, :, :]
    for start in range(0, len(numerators), 256):
        chunk = numerators[start:start + 256]
        n = np.stack([v for _, v in chunk])[:, None, :]
        found = []  # (numerator, op, divisor, shift): the simplest numerator wins
        for op in ("", "//", "ceil//"):
            shift = want - (n if not op else n // d if op == "//" else -((-n) // d))
            fits = (shift == shift[..., :1]).all(axis=-1) & \
                (np.abs(shift[..., 0]) <= PRODUCT_SHIFT)
            if not op:  # no division: a pack factor's product only (n * n * e is past)
                fits &= np.isin(np.arange(start, start + len(chunk)), list(packed))[:, None]
            hits = np.argwhere(fits)
            if len(hits):
                i, j = hits[0]
                found.append((int(i), op, int(j), int(shift[i, j, 0])))
        if found:
            i, op, j, k = min(found, key=lambda f: f[0])
            out: Expr = BinOp(op, chunk[i][0], divisors[j][0]) if op else chunk[i][0]
            return BinOp("+" if k > 0 else "-", out, Const(abs(k))) if k else out
    return None


def _power(want: np.ndarray, bases: list[tuple[Expr, np.ndarray]],
           atoms: list[tuple[Expr, np.ndarray]]) -> Expr | None:
    """`b ** e`: b of size 3 at most, e a size or int argument (0..MAX_EXPONENT in every
    call, varying): a spline basis's `(degree + 1) ** D`. Needs calls where both vary."""
    exponents = [(e, v) for e, v in atoms if isinstance(e, (Dim, IntArg, ListLen))
                 and len(set(v.tolist())) > 1 and v.min() >= 0 and v.max() <= MAX_EXPONENT]
    if len(want) < 3 or not exponents:
        return None
    for base, bv in bases:
        if bv.min() < 2 or bv.max() > MAX_BASE:
            continue
        for exponent, ev in exponents:
            if np.array_equal(bv ** ev, want):
                return BinOp("**", base, exponent)
    return None


def floored_affine(target: Sequence[int] | np.ndarray, available: Sequence[Term]
                   ) -> Expr | None:
    """`(c1 * t1 + c2 * t2 + c3 * t3 + c0) // d + k`: a strided window's count, as conv,
    pool, unfold and frame stacking size their outputs (`(T + 2 * padding - K) // stride
    + 1`). t are sizes and int arguments that vary, c in COEFFICIENTS, c0 within
    AFFINE_OFFSET, d a size or int argument positive in every call, k 0 or 1; fewest terms
    first. Needs AFFINE_MIN_CALLS calls at least: a floor fits few calls too easily."""
    want = np.asarray(target, dtype=np.int64)
    if len(want) < AFFINE_MIN_CALLS:
        return None
    atoms = [(t.expr, np.asarray(t.values, dtype=np.int64)) for t in available
             if isinstance(t.expr, (Dim, IntArg, ListLen)) and len(set(t.values)) > 1]
    atoms = atoms[:AFFINE_MAX_ATOMS]
    divisors = [(e, v) for e, v in atoms if (v > 1).any() and (v > 0).all()]
    if not atoms or not divisors:
        return None
    coef = np.array(COEFFICIENTS, dtype=np.int64)
    offsets = np.arange(-AFFINE_OFFSET, AFFINE_OFFSET + 1, dtype=np.int64)
    for count in range(1, 4):
        for picks in combinations(range(len(atoms)), count):
            for signs in product(coef, repeat=count):
                if signs[0] < 0:  # a person writes the positive term first
                    continue
                base = sum(int(c) * atoms[i][1] for c, i in zip(signs, picks, strict=True))
                numerators = base[None, :] + offsets[:, None]  # offset-major
                for d, dv in divisors:
                    quotient = numerators // dv[None, :]
                    for k in (1, 0):
                        hits = np.nonzero(((quotient + k) == want).all(axis=1) &
                                          (numerators >= 0).all(axis=1))[0]
                        if len(hits):
                            parts = [(int(c), atoms[i][0]) for c, i in zip(signs, picks,
                                                                        strict=True)]
                            inner = _sum(parts, int(offsets[hits[0]]))
                            out: Expr = BinOp("//", inner, d)
                            return BinOp("+", out, Const(k)) if k else out
    return None


def linear_combination(target: Sequence[int] | np.ndarray, available: Sequence[Term]
                       ) -> Expr | None:
    """`c1 * m1 + ... + c0`: at most MAX_MONOMIALS monomials (a term, or a product of two),
    coefficients in COEFFICIENTS, c0 within MAX_OFFSET, fewest monomials first. Vectors
    are compared by a random linear hash (exact sums stay exact in uint64 arithmetic) and
    every hit is checked on the values themselves."""
    want = np.asarray(target, dtype=np.int64)
    if len(want) < 3:
        return None
    monomials = _monomials(available)
    if not monomials:
        return None
    basis = np.stack([v for _, v in monomials])
    # the constant drops out of differences to the first call
    diff_basis = (basis - basis[:, :1]).astype(np.uint64)
    diff_want = (want - want[0]).astype(np.uint64)
    weights = np.random.default_rng(0).integers(1, 1 << 62, len(want), dtype=np.uint64)
    with np.errstate(over="ignore"):
        hashes = (diff_basis * weights).sum(axis=1)
        goal = (diff_want * weights).sum()
        coef = np.array(COEFFICIENTS, dtype=np.int64)
        # every (coefficient, monomial) pair's hash, coefficient-major
        scaled = (coef.astype(np.uint64)[:, None] * hashes[None, :]).reshape(-1)
    picks = [(int(c), i) for c in coef for i in range(len(monomials))]
    for count in range(1, MAX_MONOMIALS + 1):
        for combo in _combos(scaled, goal, count):
            found = _check(want, basis, [picks[k] for k in combo], monomials)
            if found is not None:
                return found
    return None


def _combos(scaled: np.ndarray, goal: np.uint64, count: int) -> list[tuple[int, ...]]:
    """Index tuples into `scaled` whose hashes add up to `goal`, at most a few."""
    with np.errstate(over="ignore"):
        if count == 1:
            return [(int(k),) for k in np.nonzero(scaled == goal)[0][:8]]
        index = {}
        for k, h in enumerate(scaled.tolist()):
            index.setdefault(h, k)
        if count == 2:
            need = (goal - scaled).tolist()
            return [(k, index[h]) for k, h in enumerate(need) if h in index][:8]
        found = []
        for k in range(len(scaled)):
            need = (goal - scaled[k] - scaled[k + 1:]).tolist()
            found += [(k, k + 1 + j, index[h]) for j, h in enumerate(need) if h in index]
            if len(found) >= 8:
                break
        return found


def _check(want: np.ndarray, basis: np.ndarray, picks: list[tuple[int, int]],
           monomials: list[tuple[Expr, np.ndarray]]) -> Expr | None:
    """The expression of `picks` plus the constant that makes it `want`, where exact."""
    if len({i for _, i in picks}) < len(picks):
        return None
    total = sum(c * basis[i] for c, i in picks)
    rest = want - total
    if not (rest == rest[0]).all() or abs(int(rest[0])) > MAX_OFFSET:
        return None
    return _sum([(c, monomials[i][0]) for c, i in picks], int(rest[0]))


def _monomials(available: Sequence[Term]) -> list[tuple[Expr, np.ndarray]]:
    """Terms that vary and products of two of them, one per value vector."""
    atoms = [(t.expr, np.asarray(t.values, dtype=np.int64)) for t in available
             if len(set(t.values)) > 1]
    atoms = atoms[:MAX_ATOMS]
    made: list[tuple[Expr, np.ndarray]] = []
    seen: set[bytes] = set()
    pairs = [(a, av, b, bv) for i, (a, av) in enumerate(atoms) for b, bv in atoms[i:]]
    for expr, vec in [*atoms, *((BinOp("*", a, b), av * bv) for a, av, b, bv in pairs)]:
        key = vec.tobytes()
        if key not in seen and (vec < LIMIT).all():
            seen.add(key)
            made.append((expr, vec))
    return made


def _sum(parts: list[tuple[int, Expr]], constant: int) -> Expr:
    """`c1 * m1 + c2 * m2 - ... + c0` as an expression: positive parts first, and two
    parts that share a factor written once (`E * b - E` -> `E * (b - 1)`)."""
    parts = sorted(parts, key=lambda p: p[0] < 0)
    terms: list[tuple[int, Expr]] = []
    for coefficient, monomial in parts:
        merged = False
        for k, (c, other) in enumerate(terms):
            common = _common_factor(other, monomial)
            if common is not None and c > 0 and coefficient * c < 0:
                left, right = _cofactor(other, common), _cofactor(monomial, common)
                inner = BinOp("-", _times(c, left), _times(-coefficient, right))
                terms[k] = (1, BinOp("*", common, inner))
                merged = True
                break
        if not merged:
            terms.append((coefficient, monomial))
    expr: Expr | None = None
    for coefficient, monomial in terms:
        part = _times(abs(coefficient), monomial)
        expr = part if expr is None and coefficient > 0 else BinOp(
            "+" if coefficient > 0 else "-", expr if expr is not None else Const(0), part)
    assert expr is not None
    if constant:
        expr = BinOp("+" if constant > 0 else "-", expr, Const(abs(constant)))
    return expr


def _factors(e: Expr) -> list[Expr]:
    return [e.left, e.right] if isinstance(e, BinOp) and e.op == "*" else [e]


def _common_factor(a: Expr, b: Expr) -> Expr | None:
    return next((f for f in _factors(a) if f in _factors(b)), None)


def _cofactor(e: Expr, factor: Expr) -> Expr:
    rest = list(_factors(e))
    rest.remove(factor)
    return rest[0] if rest else Const(1)


def _times(c: int, e: Expr) -> Expr:
    return e if c == 1 else BinOp("*", Const(c), e)


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
    if isinstance(expr, ItemSize):
        arg = call.arg(expr.arg)
        return _itemsize(arg.tensor.dtype if expr.tensor else arg.value)
    if isinstance(expr, ListLen):
        return len(call.arg(expr.arg).value)
    a, b = evaluate(expr.left, call), evaluate(expr.right, call)
    if expr.op == "**":
        return a ** b if b >= 0 and b * max(a, 1).bit_length() < 64 else -1
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else -1,
            "ceil//": -(-a // b) if b else -1, "max": max(a, b), "min": min(a, b)}[expr.op]


def size(expr: Expr) -> int:
    return 1 + size(expr.left) + size(expr.right) if isinstance(expr, BinOp) else 1
