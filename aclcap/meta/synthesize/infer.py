"""From observed calls of a real kernel to an OpRule: per output a shape of small integer
expressions (expr_search), a dtype, a layout and an alias rule; what the op writes; and where
its schema says less than the kernel does. Pure: it reads ObservedCalls, runs nothing.

Every third call is held out: a formula fitted on the others must give the held-out calls'
sizes too. Where it does not, a small formula fitted on all calls is kept; a larger one is
not trusted, and the dim is data-dependent with a note saying why."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import torch

from aclcap._compat import OpOverload, SchemaArgument
from aclcap.meta.observe import VARIATION, ObservedCall, TensorFacts
from aclcap.meta.synthesize.expr_search import evaluate, search, size, terms
from aclcap.meta.synthesize.rules import (
    NONE_CONDITIONS,
    AliasRule,
    AlongDim,
    BinOp,
    Dim,
    DtypeRule,
    Expr,
    LayoutRule,
    LeadingDims,
    OpRule,
    OutputRule,
    RankGuard,
    SchemaDefect,
    TrailingDims,
    Unbacked,
    WholeShape,
)
from aclcap.meta.synthesize.schema import OpSchema

HOLD_OUT_EVERY = 3
ONE_RANK = "fitted on rank"  # a note's words where an output's rule covers one rank of it
# A note's words where the calls' output strides follow no one layout rule (contiguous, an
# input's stride order, one dense order): a kernel that keeps a 2-D input's layout and
# copies a 3-D one through a reshape. A rank guard may settle it.
LAYOUT_MIXED = "no one layout rule fits its calls"
# A formula found only once the held-out calls join the fit is trusted when it is a term or
# one operation on two: larger ones can fit a few calls by accident (n - n // x.shape[0]
# fits min(n, x.shape[0]) while n < 2 * x.shape[0]).
MAX_REFIT_SIZE = 3


# Where several fit (no negative value was seen), the sign test a person writes comes first.
_NUMBER_CONDITIONS = ("is None", "> 0", "<= 0", "== 0", "!= 0", "< 0", ">= 0", "is not None")
assert set(_NUMBER_CONDITIONS) <= set(NONE_CONDITIONS)


class SynthesisError(ValueError):
    """What synthesis cannot express (a non-tensor output, no call with outputs)."""


def held_out(n: int, third: int = 0) -> list[int]:
    """Indices of the calls held out of fitting: every third, once there are 3 calls;
    `third` 1 and 2 hold out the other two thirds."""
    start = (HOLD_OUT_EVERY - 1 + third) % HOLD_OUT_EVERY
    return [i for i in range(n) if i % HOLD_OUT_EVERY == start] if n >= 3 else []


def _tensor_return(ret: SchemaArgument) -> bool:
    return str(ret.type) in ("Tensor", "Optional[Tensor]")


def _none_when(calls: Sequence[ObservedCall], index: int) -> tuple[str, str] | None:
    """The first (argument, condition) that holds exactly in the calls where output
    `index` is None."""
    is_none = [c.outputs[index] is None for c in calls]
    for arg in calls[0].args:
        values = [c.arg(arg.name) for c in calls]
        plain = [None if v.tensor is not None or v.tensors is not None else v.value
                 for v in values]
        if any(v.tensor is not None for v in values):  # an optional tensor: None or not
            plain = [None if v.tensor is None else 0 for v in values]
            conditions: tuple[str, ...] = ("is None", "is not None")
        elif all(isinstance(v, bool) for v in plain):
            conditions = ("is True", "is False")
        elif all(v is None or isinstance(v, (int, float)) for v in plain):
            conditions = _NUMBER_CONDITIONS
        else:
            continue
        for condition in conditions:
            if [_holds(v, condition) for v in plain] == is_none:
                return arg.name, condition
    return None


def _holds(value: object, condition: str) -> bool:
    if condition in ("is None", "is not None"):
        return (value is None) == (condition == "is None")
    if condition in ("is True", "is False"):
        return value is (condition == "is True")
    if value is None:
        return False
    op, rhs = condition.split()
    return {"==": value == 0, "!=": value != 0, ">": value > 0, "<=": value <= 0,
            "<": value < 0, ">=": value >= 0}[op] if rhs == "0" else False


def _data_dependent(calls: Sequence[ObservedCall], target: list[int]) -> bool:
    """Two calls with the same shapes, dtypes and arguments but different sizes out: the
    size follows the values (a nonzero-like op), and no formula of sizes can give it."""
    seen: dict[tuple, int] = {}
    for call, value in zip(calls, target, strict=True):
        if seen.setdefault(call.key(), value) != value:
            return True
    return False


def _fits(expr: Expr, calls: Sequence[ObservedCall], target: Sequence[int]) -> bool:
    try:
        return all(evaluate(expr, c) == t for c, t in zip(calls, target, strict=True))
    except (IndexError, TypeError, KeyError, StopIteration):
        return False  # a term the held-out call does not have (another rank, None)


def _fit_dim(calls: Sequence[ObservedCall], target: list[int], notes: list[str],
             what: str) -> Expr | Unbacked:
    """The smallest expression for one dim: fitted on the calls not held out, checked on
    the held-out ones, refitted on all where that check fails."""
    if _data_dependent(calls, target):
        notes.append(f"{what} differs between calls with the same input sizes: "
                     "data-dependent")
        return Unbacked(min(target), max(target))
    expr, failed = _fit_held_out(calls, target, 0)
    if failed:
        # The only call that changes some argument (`block_size`) may sit in the held-out
        # third, which the formula then cannot know: the other two thirds are held out in
        # turn, each formula checked on the calls it was not fitted on.
        for third in range(1, HOLD_OUT_EVERY):
            other, still = _fit_held_out(calls, target, third)
            if other is not None and not still:
                notes.append(f"{what}: fitted with another third of the calls held out "
                             "(the first third held the only calls of a change it needs)")
                return other
        refit = search(target, terms(calls))
        if refit is not None and size(refit) > MAX_REFIT_SIZE:
            notes.append(f"{what}: the formula fitted on {len(calls) - len(failed)} calls "
                         f"failed on the {len(failed)} held out, and only a larger one fits "
                         "all: none trusted")
            return Unbacked(min(target), max(target), data_dependent=False)
        expr = refit
    if expr is None:
        notes.append(f"{what}: no formula of input sizes and int arguments fits "
                     f"{len(calls)} calls (sizes {min(target)}..{max(target)})")
        return Unbacked(min(target), max(target), data_dependent=False)
    return expr


def _fit_held_out(calls: Sequence[ObservedCall], target: list[int], third: int
                  ) -> tuple[Expr | None, list[int]]:
    """The smallest expression fitted on the calls outside `third`'s held-out ones, and the
    held-out calls it fails on (all of them, where it fails any)."""
    held = held_out(len(calls), third)
    fit = [i for i in range(len(calls)) if i not in held]
    expr = search([target[i] for i in fit], terms([calls[i] for i in fit]))
    if expr is None or _fits(expr, [calls[i] for i in held], [target[i] for i in held]):
        return expr, []
    return expr, held


def _whole_shape(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts]) -> str | None:
    for arg in calls[0].args:
        values = [c.arg(arg.name).value for c in calls]
        if all(isinstance(v, list) and list(o.shape) == v for v, o in
               zip(values, outs, strict=True)):
            return arg.name
    return None


def _same_shape(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts]) -> str | None:
    """The tensor argument whose whole shape the output has in every call."""
    for arg in calls[0].args:
        facts = [c.arg(arg.name).tensor for c in calls]
        if all(f is not None and f.shape == o.shape for f, o in zip(facts, outs, strict=True)):
            return arg.name
    return None


def _leading(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts]
             ) -> LeadingDims | None:
    """The input whose leading dims (all but the last `drop`) the output starts with in
    every call, followed by the same number of trailing dims: `[*x.shape[:-1], ...]`."""
    for arg in calls[0].args:
        facts = [c.arg(arg.name).tensor for c in calls]
        if any(f is None for f in facts):
            continue
        for drop in range(min(len(f.shape) for f in facts) + 1):
            keep = [len(f.shape) - drop for f in facts]
            trailing = {len(o.shape) - k for o, k in zip(outs, keep, strict=True)}
            if len(trailing) == 1 and min(trailing) >= 0 and all(
                    o.shape[:k] == f.shape[:k] for o, f, k in zip(outs, facts, keep,
                                                                  strict=True)):
                return LeadingDims(arg.name, drop)
    return None


def _tensor_args(calls: Sequence[ObservedCall]) -> list[str]:
    return [a.name for a in calls[0].args if all(c.arg(a.name).tensor is not None
                                                   for c in calls)]


def _gathered(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts]
              ) -> tuple[LeadingDims, TrailingDims] | None:
    """`[*idx.shape, *x.shape[skip:]]` in every call, for an `idx` whose rank varied: an
    index tensor's dims followed by the indexed tensor's trailing dims."""
    names = _tensor_args(calls)
    for lead in names:
        if len({len(c.arg(lead).tensor.shape) for c in calls}) < 2:
            continue
        for rest in names:
            low = min(len(c.arg(rest).tensor.shape) for c in calls)
            for skip in range(1, low + 1):
                if rest != lead and all(
                        o.shape == c.arg(lead).tensor.shape + c.arg(rest).tensor.shape[skip:]
                        for c, o in zip(calls, outs, strict=True)):
                    return LeadingDims(lead, 0), TrailingDims(rest, skip)
    return None


def _along_dim(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts], index: int,
               notes: list[str], frame: AlongDim | None = None, exclude: str | None = None
               ) -> AlongDim | None:
    """The output is a tensor argument's shape with one dim replaced, removed, or kept as 1
    where a bool argument says so, in every call, over at least two dims picked or ranks
    around it: a reduction or a scatter along the dim an int argument picks, or a segment
    reduction along the last dim of its offsets tensor. With a `frame` (the other regime's
    rule), along its argument and dim whatever dims these calls picked."""
    bools = [a.name for a in calls[0].args
             if all(isinstance(c.arg(a.name).value, bool) for c in calls)]
    for arg in _tensor_args(calls) if frame is None else [frame.arg]:
        if arg == exclude:  # the tensor whose own shape `outs` are
            continue
        shapes = [c.arg(arg).tensor.shape for c in calls]
        for dim_arg, rank_of, values in _dim_sources(calls, arg, frame):
            if not all(-len(s) <= v < len(s) for s, v in zip(shapes, values, strict=True)):
                continue
            picked = [v % len(s) for s, v in zip(shapes, values, strict=True)]
            if len(set(picked)) < 2 and len({len(s) for s in shapes}) < 2 and frame is None:
                continue  # neither the dim picked nor the rank around it ever moved
            rest = [s[:d] + s[d + 1:] for s, d in zip(shapes, picked, strict=True)]
            if all(len(o.shape) == len(s) and o.shape[:d] + o.shape[d + 1:] == r for o, s, d, r
                   in zip(outs, shapes, picked, rest, strict=True)):
                what = f"`{rank_of}.dim() - 1`" if rank_of else f"`{dim_arg}`"
                middle = _fit_dim(calls, [o.shape[d] for o, d in zip(outs, picked, strict=True)],
                                  notes, f"output {index} dim {what}")
                return AlongDim(arg, dim_arg, (middle,), rank_of=rank_of)
            if all(o.shape == r for o, r in zip(outs, rest, strict=True)):
                return AlongDim(arg, dim_arg, rank_of=rank_of)
            for keep in bools:
                if all(o.shape == ((*s[:d], 1, *s[d + 1:]) if c.arg(keep).value else r)
                       for c, o, s, d, r in zip(calls, outs, shapes, picked, rest, strict=True)):
                    return AlongDim(arg, dim_arg, keepdim=keep, rank_of=rank_of)
    return None


def _dim_sources(calls: Sequence[ObservedCall], arg: str, frame: AlongDim | None
                 ) -> list[tuple[str, str | None, list[int]]]:
    """(int argument, tensor whose last dim it is, the dim in each call) of each way a call
    can pick the dim of `arg` an output runs along: an int argument's value first, then
    another tensor's rank minus 1, only where that rank moved (otherwise the constant dim
    it gives is no more than a fitted leading size)."""
    if frame is not None:
        return [(frame.dim_arg, frame.rank_of, [
            len(c.arg(frame.rank_of).tensor.shape) - 1 if frame.rank_of else
            c.arg(frame.dim_arg).value
            for c in calls])]
    found: list[tuple[str, str | None, list[int]]] = [
        (a.name, None, [c.arg(a.name).value for c in calls]) for a in calls[0].args if all(
            isinstance(c.arg(a.name).value, int) and not isinstance(c.arg(a.name).value, bool)
            for c in calls)]
    for other in _tensor_args(calls):
        ranks = [len(c.arg(other).tensor.shape) for c in calls]
        if other != arg and min(ranks) >= 1 and len(set(ranks)) > 1:
            found.append(("", other, [r - 1 for r in ranks]))
    return found


def _shape(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts], index: int,
           notes: list[str]
           ) -> tuple[LeadingDims | Expr | Unbacked | TrailingDims, ...] | WholeShape | AlongDim:
    whole = _whole_shape(calls, outs)
    if whole is not None:
        return WholeShape(whole)
    ranks = Counter(len(o.shape) for o in outs)
    rank = ranks.most_common(1)[0][0]
    same = _same_shape(calls, outs)
    if same is not None:  # a whole input shape generalizes past the ranks seen
        return (LeadingDims(same, 0),)
    along = _along_dim(calls, outs, index, notes)
    if along is not None:
        return along
    if len(ranks) > 1:
        gathered = _gathered(calls, outs)
        if gathered is not None:
            return gathered
        leading = _leading(calls, outs)
        if leading is not None:
            trailing = len(outs[0].shape) - (len(calls[0].arg(leading.arg).tensor.shape)
                                             - leading.drop)
            return (leading, *(_fit_dim(calls, [o.shape[d - trailing] for o in outs], notes,
                                        f"output {index} dim {d - trailing}")
                               for d in range(trailing)))
        notes.append(f"output {index}'s rank varies ({', '.join(map(str, sorted(ranks)))}) "
                     f"and keeps no input's leading dims: {ONE_RANK} {rank} only")
        kept = [(c, o) for c, o in zip(calls, outs, strict=True) if len(o.shape) == rank]
        calls, outs = [c for c, _ in kept], [o for _, o in kept]
    return tuple(_fit_dim(calls, [o.shape[d] for o in outs], notes, f"output {index} dim {d}")
                 for d in range(rank))


def _dtype_names() -> set[str]:
    return {name for name in dir(torch) if isinstance(getattr(torch, name), torch.dtype)}


def _dtype(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts], index: int
           ) -> DtypeRule:
    """Like an input whose dtype varied with it, a ScalarType argument, promotion over two
    inputs (or all), a fixed dtype where inputs' dtypes varied and it did not, like a float
    input where nothing varied, in that order of preference."""
    want = [o.dtype for o in outs]
    tensors = _tensor_args(calls)
    dtypes = {name: [c.arg(name).tensor.dtype for c in calls] for name in tensors}
    like = [name for name in tensors if dtypes[name] == want]
    varied = [name for name in like if len(set(dtypes[name])) > 1]
    if varied:
        return DtypeRule("like", arg=varied[0])
    names = _dtype_names()
    for arg in calls[0].args:
        values = [c.arg(arg.name).value for c in calls]
        if all(isinstance(v, str) and v in names for v in values) and values == want:
            return DtypeRule("arg", arg=arg.name)
    floats = [n for n in tensors if all(getattr(torch, d).is_floating_point
                                        for d in dtypes[n])]
    groups = [(a, b) for i, a in enumerate(floats) for b in floats[i + 1:]]
    for group in [*groups, tuple(floats)] if len(floats) > 2 else groups:
        if len({tuple(dtypes[n]) for n in group}) > 1 and [_promoted(dtypes, group, i) for i
                                                          in range(len(calls))] == want:
            return DtypeRule("promote", args=tuple(group))
    if len(set(want)) == 1 and any(len(set(d)) > 1 for d in dtypes.values()):
        return DtypeRule("fixed", dtype=want[0])
    floats_like = [name for name in like if getattr(torch, want[0]).is_floating_point]
    if floats_like:
        return DtypeRule("like", arg=floats_like[0])
    if len(set(want)) == 1:
        return DtypeRule("fixed", dtype=want[0])
    raise SynthesisError(f"output {index}'s dtype ({', '.join(sorted(set(want)))}) follows "
                         "no input, ScalarType argument or promotion")


def _promoted(dtypes: dict[str, list[str]], group: Sequence[str], call: int) -> str:
    dtype = getattr(torch, dtypes[group[0]][call])
    for name in group[1:]:
        dtype = torch.promote_types(dtype, getattr(torch, dtypes[name][call]))
    return str(dtype).removeprefix("torch.")


def _dense_strides(shape: Sequence[int], order: Sequence[int]) -> list[int]:
    """Strides of a dense tensor of `shape` whose dims run outermost to innermost in
    `order`."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def _same_strides(out: TensorFacts, strides: Sequence[int]) -> bool:
    return all(s == e for s, e, n in zip(out.strides, strides, out.shape, strict=True) if n > 1)


def contiguous(o: TensorFacts) -> bool:
    """Laid out as a contiguous tensor of its shape (a size-1 dim's stride aside)."""
    return _same_strides(o, _dense_strides(o.shape, range(len(o.shape))))


def _layout(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts], index: int,
            notes: list[str]) -> LayoutRule:
    if all(map(contiguous, outs)):
        return LayoutRule("contiguous")
    for arg in calls[0].args:
        facts = [c.arg(arg.name).tensor for c in calls]
        if all(f is not None and len(f.shape) == len(o.shape) for f, o in
               zip(facts, outs, strict=True)):
            if all(_same_strides(o, _dense_strides(o.shape, _order(f))) for f, o in
                   zip(facts, outs, strict=True)):
                return LayoutRule("like", arg=arg.name)
    if (by_rank := _like_by_rank(calls, outs)) is not None:
        return by_rank
    orders = {tuple(_order(o)) for o in outs if sum(n > 1 for n in o.shape) > 1}
    if len(orders) == 1 and all(len(o.shape) == len(outs[0].shape) for o in outs):
        order = orders.pop()
        if all(_same_strides(o, _dense_strides(o.shape, order)) for o in outs):
            return LayoutRule("order", order=order)
    odd = next(o for o in outs if not contiguous(o))
    notes.append(f"output {index}'s layout: {LAYOUT_MIXED} (strides {list(odd.strides)} at "
                 f"shape {list(odd.shape)}, contiguous elsewhere): emitted contiguous")
    return LayoutRule("contiguous")


def _order(f: TensorFacts) -> list[int]:
    """Dims from the largest stride to the smallest."""
    return sorted(range(len(f.shape)), key=lambda d: (-f.strides[d], d))


def _like_by_rank(calls: Sequence[ObservedCall], outs: Sequence[TensorFacts]
                  ) -> LayoutRule | None:
    """An input's stride order at some of its ranks and contiguous at the others, each
    shown by a call where the two differ: where no one layout rule fits every call."""
    for arg in calls[0].args:
        facts = [c.arg(arg.name).tensor for c in calls]
        if any(f is None for f in facts):
            continue
        like: dict[int, bool] = {}  # per rank: every call keeps the input's order
        plain: dict[int, bool] = {}  # per rank: every call is contiguous
        for f, o in zip(facts, outs, strict=True):
            rank = len(f.shape)
            keeps = len(o.shape) == rank and _same_strides(o, _dense_strides(o.shape,
                                                                            _order(f)))
            like[rank] = like.get(rank, True) and keeps
            plain[rank] = plain.get(rank, True) and contiguous(o)
        if not all(like[r] or plain[r] for r in like):
            continue
        like_ranks = tuple(sorted(r for r in like if like[r] and not plain[r]))
        if like_ranks and any(plain[r] and not like[r] for r in like):
            return LayoutRule("like", arg=arg.name, ranks=like_ranks)
    return None


def _alias(outs: Sequence[TensorFacts]) -> AliasRule:
    """Input, view or none; "mixed" where some calls alias and others do not (regimes of an
    optional `out`), which _output settles or replaces by none."""
    names = {o.aliases for o in outs}
    if len(names) == 1 and None not in names:
        return AliasRule("input" if all(o.is_input for o in outs) else "view", names.pop())
    return AliasRule("mixed" if len(names) > 1 else "none")


def _given(call: ObservedCall, arg: str, test: str = "is not None") -> bool:
    """Whether `call` falls in the first regime of `arg` under `test` (REGIME_TESTS)."""
    facts = call.arg(arg)
    if test == "is not None":
        return facts.tensor is not None or facts.tensors is not None or \
            facts.value is not None
    value = facts.value
    return value is True if test == "is True" else \
        isinstance(value, int | float) and not isinstance(value, bool) and value == 0


# The tests a regime splits calls by: an optional argument given or None; a scalar argument
# at zero or not (a temperature of 0, a limit of 0); a bool argument.
REGIME_TESTS = ("is not None", "== 0", "is True")


def _regime_splits(calls: Sequence[ObservedCall], optional: Sequence[str]
                   ) -> list[tuple[str, str]]:
    """(argument, test) pairs that split `calls` into two non-empty regimes: each optional
    argument, and each scalar argument that is zero (or True) in some calls only."""
    splits = [(arg, "is not None") for arg in optional]
    for arg in calls[0].args:
        if arg.tensor is not None or arg.tensors is not None or arg.name in optional:
            continue
        for test in REGIME_TESTS[1:]:
            held = {_given(c, arg.name, test) for c in calls}
            if held == {True, False}:
                splits.append((arg.name, test))
    return splits


def regime_of(out: OutputRule, call: ObservedCall) -> OutputRule:
    """The rule `call` falls under: its regime of each argument (rules.OutputRule.given),
    without the other regimes."""
    while out.given is not None:
        arg, given, absent = out.given
        out = given if _given(call, arg, out.given_test) else absent
    return out


def _layout_flaw(rule: OutputRule, call: ObservedCall, index: int) -> bool:
    """The call's output is laid out otherwise than the rule's layout makes it: the
    input's stride order (empty_like's), a fixed order, or contiguous."""
    out = call.outputs[index] if call.outputs and index < len(call.outputs) else None
    if out is None or rule.shape is None or rule.alias.kind != "none":
        return False
    layout, rank = rule.layout, len(out.shape)
    order: Sequence[int] = range(rank)
    if layout.kind == "like" and layout.arg is not None:
        like = call.arg(layout.arg).tensor
        if like is not None and len(like.shape) == rank and (
                not layout.ranks or rank in layout.ranks):
            order = _order(like)
    elif layout.kind == "order" and len(layout.order) == rank:
        order = layout.order
    return not _same_strides(out, _dense_strides(out.shape, order))


def _flaws(rule: OutputRule | None, calls: Sequence[ObservedCall], index: int) -> int:
    """What a rule leaves unsettled, counted per call in the regime it falls under: a
    data-dependent size, an alias that holds in some calls only, an output laid out
    otherwise than the rule says; no rule at all (no dtype rule fits) counts most. A regime
    that settles the calls where an argument is given beats one rule that settles none."""
    if rule is None:
        return len(calls) << 8
    flaws = 0
    for call in calls:
        own = regime_of(rule, call)
        flaws += sum(isinstance(e, Unbacked) for e in own.sizes()) + (own.alias.kind == "mixed")
        flaws += _layout_flaw(own, call, index)
    return flaws


def _output(calls: Sequence[ObservedCall], index: int, notes: list[str],
            optional: Sequence[str] = ()) -> OutputRule:
    """The output's rule over `calls`; where it leaves something unsettled and an optional
    argument is given in some calls and None in others, the rule of each regime (`dim_size`
    given: a size from it; None: one that follows the data; `out` given: `out` itself)."""
    own: list[str] = []
    try:
        rule: OutputRule | None = _plain_output(calls, index, own)
    except SynthesisError:
        rule = None
    least = _flaws(rule, calls, index)
    best: tuple[OutputRule, list[str]] | None = None
    for arg, test in _regime_splits(calls, optional) if least else ():
        given = [c for c in calls if _given(c, arg, test)]
        absent = [c for c in calls if not _given(c, arg, test)]
        if not given or not absent:
            continue
        tried: list[str] = []
        try:
            rest = [o for o in optional if o != arg]
            when_given = _output(given, index, tried, rest)
            when_none = _framed(absent, index, tried, rest, when_given, given)
            split = replace(when_none, given=(arg, when_given, when_none), given_test=test)
        except SynthesisError:
            continue
        flaws = _flaws(split, calls, index)
        if flaws < least:
            least, best = flaws, (split, tried)
    if best is not None:
        notes += best[1]
        return best[0]
    if rule is None:
        return _plain_output(calls, index, notes)  # raises what no regime settles
    notes += own
    return replace(rule, alias=AliasRule("none")) if rule.alias.kind == "mixed" else rule


def _framed(calls: Sequence[ObservedCall], index: int, notes: list[str],
            optional: Sequence[str], other: OutputRule, other_calls: Sequence[ObservedCall]
            ) -> OutputRule:
    """The rule of one regime, along the same `dim` argument as the other regime's where
    that fits: a regime seen at one `dim` value and rank (`dim_size` None) takes the frame
    the other showed over several; where the other returns an input itself (`out=` given),
    the frame that input's shape keeps to the others (`out` is `src` resized along `dim`)."""
    rule = _output(calls, index, notes, optional)
    frame = other.shape if isinstance(other.shape, AlongDim) else _kept_frame(other, other_calls,
                                                                              index)
    present = [c for c in calls if c.outputs[index] is not None]
    if frame is None or isinstance(rule.shape, AlongDim) or rule.given is not None or \
            not present:
        return rule
    outs = [c.outputs[index] for c in present]
    framed = _along_dim(present, outs, index, [], frame)
    return rule if framed is None else replace(rule, shape=framed)


def _kept_frame(rule: OutputRule, calls: Sequence[ObservedCall], index: int
                ) -> AlongDim | None:
    """The AlongDim that the input a regime's output is, or is shaped as (`out` given, an
    index tensor shaped as `out`), keeps to the other inputs over the regime's calls; None
    where the output follows no one input's shape, or that input keeps none."""
    name = _shaped_as(rule)
    kept = [c.arg(name).tensor for c in calls] if name else []
    if not kept or any(t is None for t in kept):
        return None
    return _along_dim(calls, kept, index, [], None, exclude=name)


def _shaped_as(rule: OutputRule) -> str | None:
    """The input an output is, or has the whole shape of."""
    if rule.alias.kind == "input":
        return rule.alias.arg
    shape = rule.shape
    if isinstance(shape, tuple) and len(shape) == 1 and isinstance(shape[0], LeadingDims) \
            and shape[0].drop == 0:
        return shape[0].arg
    return None


def _plain_output(calls: Sequence[ObservedCall], index: int, notes: list[str]) -> OutputRule:
    present = [c for c in calls if c.outputs[index] is not None]
    if not present:
        return OutputRule(shape=None)
    none_when = None
    if len(present) < len(calls):
        none_when = _none_when(calls, index)
        if none_when is None:
            notes.append(f"output {index} is None in {len(calls) - len(present)} of "
                         f"{len(calls)} calls, decided by no single argument")
    outs = [c.outputs[index] for c in present]
    shape = _shape(present, outs, index, notes)
    layout = _layout(present, outs, index, notes)
    if layout.kind == "order" and isinstance(shape, tuple) and shape and \
            isinstance(shape[0], LeadingDims):  # a fixed order is of one rank: dim by dim
        lead = shape[0]
        rank = len(present[0].arg(lead.arg).tensor.shape)
        shape = (*(Dim(lead.arg, -1 if d == rank - 1 else d) for d in range(rank - lead.drop)),
                 *shape[1:])
    return OutputRule(shape, _dtype(present, outs, index), layout, _alias(outs), none_when)


def _evidence(calls: Sequence[ObservedCall]) -> str:
    """"14 calls; input [1..66, 64..512]; input, weight: float32, bfloat16": what the rule
    rests on, each dtype set with the arguments that had it."""
    parts = [f"{len(calls)} calls"]
    first = next((a.name for a in calls[0].args if a.tensor is not None), None)
    if first and len({len(c.arg(first).tensor.shape) for c in calls}) == 1:
        dims = zip(*(c.arg(first).tensor.shape for c in calls), strict=True)
        ranges = [f"{min(d)}..{max(d)}" if min(d) != max(d) else str(d[0]) for d in dims]
        parts.append(f"{first} [{', '.join(ranges)}]")
    groups: dict[tuple[str, ...], list[str]] = {}
    for arg in calls[0].args:
        seen = [c.arg(arg.name).tensor for c in calls]
        if all(t is not None for t in seen):
            floats = tuple(dict.fromkeys(t.dtype for t in seen
                                         if t.dtype.startswith(("float", "bfloat"))))
            if floats:
                groups.setdefault(floats, []).append(arg.name)
    parts += [f"{', '.join(names)}: {', '.join(dtypes)}" for dtypes, names in groups.items()]
    return "; ".join(parts)


def _defects(schema: OpSchema, outputs: list[OutputRule], writes: list[str]
             ) -> list[SchemaDefect]:
    messages = [f"writes `{a.name}` but the schema does not mark it mutable "
                f"(`Tensor(a!) {a.name}`)" for a in schema.args
                if a.name in writes and not a.write]
    aliased = {}
    for i, (rule, ret) in enumerate(zip(outputs, schema.returns, strict=True)):
        if rule.alias.kind != "none":
            aliased[i] = rule.alias.arg
            if ret.alias_set is None:
                what = "is" if rule.alias.kind == "input" else "is a view of"
                messages.append(f"output {i} {what} `{rule.alias.arg}` but the schema does "
                                "not annotate the alias")
    if not messages:
        return []
    fixed = schema.corrected(writes, aliased).text(with_namespace=False)
    return [SchemaDefect(m, fixed) for m in messages]


_ALONE = re.compile(r"^(?P<arg>\w+) (?:dim (?P<dim>\d+) )?alone")
_TOGETHER = re.compile(r"^(?P<members>.+) together(?::|$)")
_MEMBER = re.compile(r"(\w+) dim (\d+)")


def _separated(rejected: Sequence[str]) -> list[set[tuple[str, int]]]:
    """The dims each rejected group change changed together (variations' "dim-group"): two
    dims one of these changed without the other were tied by the kernel, as far as the
    search of every group went."""
    return [{(a, int(d)) for a, d in _MEMBER.findall(m["members"])}
            for m in map(_TOGETHER.match, rejected) if m]


def _rank(calls: Sequence[ObservedCall], arg: str) -> int:
    """The rank of tensor argument `arg` in the first call that passes it."""
    return next(len(c.arg(arg).tensor.shape) for c in calls if c.arg(arg).tensor is not None)


def _dims_used(out: OutputRule, calls: Sequence[ObservedCall]) -> list[tuple[str, int]]:
    """(argument, dim from 0) of every input dim an output shape reads, in every regime."""
    shape = out.shape
    used: list[tuple[str, int]] = []
    if out.given is not None:
        return [*_dims_used(out.given[1], calls), *_dims_used(out.given[2], calls)]
    if isinstance(shape, AlongDim):
        rank = _rank(calls, shape.arg)
        used += [(shape.arg, d) for d in range(rank)]
        shape = shape.middle
    if not isinstance(shape, tuple):
        return used

    def walk(e: object) -> None:
        if isinstance(e, Dim) and e.item is None:
            rank = _rank(calls, e.arg)
            used.append((e.arg, e.index % rank))
        elif isinstance(e, LeadingDims):
            rank = _rank(calls, e.arg)
            used.extend((e.arg, d) for d in range(rank - e.drop))
        elif isinstance(e, TrailingDims):
            rank = _rank(calls, e.arg)
            used.extend((e.arg, d) for d in range(e.skip, rank))
        elif isinstance(e, BinOp):
            walk(e.left)
            walk(e.right)

    for e in shape:
        walk(e)
    return used


def _unproven(calls: Sequence[ObservedCall], outputs: list[OutputRule],
              rejected: Sequence[str]) -> list[str]:
    """What no call could tell apart, so the rule stays a guess there: two input dims (or
    dtypes) equal in every call where neither was varied alone (the kernel rejecting that
    ties them), and output dims that were 0 in every call."""
    tied = {(m["arg"], None) for m in map(_ALONE.match, rejected) if m and not m["dim"]}
    alone = {(m["arg"], int(m["dim"])) for m in map(_ALONE.match, rejected) if m and m["dim"]}
    groups = _separated(rejected)

    def tied_dims(a: tuple[str, int], b: tuple[str, int], equal: int) -> bool:
        """The kernel rejected a change of one of a, b without the other: a group change,
        or, where only the two held that size (`equal`), one of them changed alone. Alone
        changes of three or more prove nothing between two (q tied to k, v to the state)."""
        if any((a in g) != (b in g) for g in groups):
            return True
        return equal == 2 and (a in alone or b in alone)

    vectors: dict[tuple[str, int], tuple[int, ...]] = {}
    for arg in calls[0].args:
        facts = [c.arg(arg.name).tensor for c in calls]
        if all(f is not None for f in facts) and len({len(f.shape) for f in facts}) == 1:
            for d in range(len(facts[0].shape)):
                vectors[(arg.name, d)] = tuple(f.shape[d] for f in facts)
    found: list[str] = []
    for i, out in enumerate(outputs):
        for key in dict.fromkeys(_dims_used(out, calls)):
            mine = vectors.get(key)
            if mine is None or len(set(mine)) == 1:  # never varied: no other size was taken
                continue
            equal = sum(v == mine for v in vectors.values())
            twins = [k for k, v in vectors.items() if k[0] != key[0] and v == mine
                     and not tied_dims(key, k, equal)]
            if twins:
                found.append(f"output {i} follows `{key[0]}` dim {key[1]}, which equalled "
                             + ", ".join(f"`{a}` dim {d}" for a, d in twins[:3])
                             + " in every call: give a sample where they differ")
        if _unshown(out):
            found.append(f"output {i} has a size that fits no formula of the inputs, yet "
                         "equal inputs always gave it equal: not shown data-dependent")
        shapes = [c.outputs[i].shape for c in calls if c.outputs[i] is not None]
        if shapes and len({len(s) for s in shapes}) == 1 and any(
                all(s[d] == 0 for s in shapes) for d in range(len(shapes[0]))):
            found.append(f"output {i} had a dim of 0 in every call (every call was empty "
                         "there): its size for non-empty inputs is unproven")
        like = out.dtype.arg if out.dtype is not None and out.dtype.kind == "like" else None
        if like is not None:  # over the calls that gave it (an optional tensor: some)
            given = [c for c in calls if c.arg(like).tensor is not None]
            mine = [c.arg(like).tensor.dtype for c in given]
            twins = [a.name for a in calls[0].args if a.name != like and all(
                c.arg(a.name).tensor is not None and c.arg(a.name).tensor.dtype == d
                for c, d in zip(given, mine, strict=True))
                and (a.name, None) not in tied and (like, None) not in tied]
            if twins and len(set(mine)) > 1:
                found.append(f"output {i} takes the dtype of `{like}`, which equalled that "
                             f"of {', '.join(f'`{t}`' for t in twins[:3])} in every call: "
                             "give a sample where they differ")
    return found


def infer(op: OpOverload, calls: Sequence[ObservedCall],
          rejected: Sequence[str] = ()) -> OpRule:
    """The rule every call agrees with: output shapes, dtypes, layouts and aliasing, the
    arguments written, and what the schema leaves unsaid. `calls` are real calls with
    their outputs recorded (observe.observe); `rejected` says what each call the kernel
    rejected changed (variations.Variation.description), which ties dims together."""
    calls = [c for c in calls if c.outputs is not None]
    qualname = f"{op._schema.name}.{op._overloadname or 'default'}"
    if not calls:
        raise SynthesisError(f"{qualname}: no call with recorded outputs")
    returns = op._schema.returns
    for i, ret in enumerate(returns):
        if not _tensor_return(ret):
            raise SynthesisError(f"output {i} is {ret.type}: only Tensor outputs are "
                                 "synthesized")
    optional = [a.name for a in op._schema.arguments if str(a.type).startswith("Optional[")]
    notes: list[str] = []
    outputs = [_output(calls, i, notes, optional) for i in range(len(returns))]
    guard = None
    if _unsettled(outputs, notes):
        guarded = _rank_guarded(calls, len(returns), optional, _layout_only(outputs, notes))
        if guarded is not None:
            guard, calls, outputs, notes = guarded
    written = {name for c in calls for name in c.written}
    writes = [a.name for a in op._schema.arguments if a.name in written]
    schema = OpSchema.of(op)
    held = len(held_out(len(calls)))
    partial = _partial_aliases(calls, outputs)
    misses = _layout_misses(calls, outputs)
    return OpRule(qualname, schema.text(), outputs, writes, _defects(schema, outputs, writes)
                  + [SchemaDefect(m, "") for m in partial],
                  fitted_on=len(calls) - held, held_out=held, evidence=_evidence(calls),
                  notes=_one_regime(calls, optional) + notes, spec=schema,
                  unproven=_unproven(calls, outputs, rejected) + partial + misses,
                  rank_guard=guard,
                  none_only=_none_only(op, calls, outputs),
                  # a kernel whose aliasing changes with the size is the schema's defect,
                  # never a fake: any fake is wrong at one of the sizes (issue 58)
                  unregistered=f"no fake can follow it: {partial[0]}" if partial else "")


def _one_regime(calls: Sequence[ObservedCall], optional: Sequence[str]) -> list[str]:
    """A note per optional argument that every call left None, or every call gave: the
    other regime was never observed (the kernel rejected every call aclcap made of it), so
    the fake is unproven there, and says for which argument (issue 58)."""
    notes = []
    for arg in optional:
        given = {_given(c, arg) for c in calls}
        if given == {False}:
            notes.append(f"unproven where `{arg}` is given: no call gave it (the kernel "
                         "accepted none of the values aclcap tried)")
        elif given == {True}:
            notes.append(f"unproven where `{arg}` is None: every call gave it")
    return notes


def _none_only(op: OpOverload, calls: Sequence[ObservedCall],
               outputs: Sequence[OutputRule]) -> tuple[str, ...]:
    """The optional tensor arguments no call gave, where an output was None in every call
    (rules.OpRule.none_only); () where no output was."""
    if not any(o.shape is None for o in outputs):
        return ()
    return tuple(a.name for a in op._schema.arguments if str(a.type) == "Optional[Tensor]"
                 and all(c.arg(a.name).tensor is None for c in calls))


def _partial_aliases(calls: Sequence[ObservedCall], outputs: Sequence[OutputRule]
                     ) -> list[str]:
    """Outputs that are an input, or a view of one, in some calls of a regime and fresh in
    others (a fast path at one token returning a slice): no fake can be both, and the
    schema declares neither, so the rule is a guess there, named with the call."""
    found = []
    for i, rule in enumerate(outputs):
        for call in calls:
            out = call.outputs[i] if call.outputs and i < len(call.outputs) else None
            if out is None or out.aliases is None or \
                    regime_of(rule, call).alias.kind != "none":
                continue
            shapes = ", ".join(f"{a.name} {list(a.tensor.shape)}" for a in call.args
                               if a.tensor is not None)
            found.append(f"output {i} is a view of `{out.aliases}` at {shapes} and a fresh "
                         "tensor at other sizes: no fake can be both, and the schema "
                         "declares no alias; make the kernel return a copy there (or a view "
                         "always, annotated in the schema)")
            break
    return found


def _layout_misses(calls: Sequence[ObservedCall], outputs: Sequence[OutputRule]
                   ) -> list[str]:
    """Outputs whose rule lays them out otherwise than the kernel did on some call (no one
    layout rule, nor a regime of one, fits them all): a fake that is wrong there, on a
    transposed or strided input, is never called verified (issue 58)."""
    found = []
    for i, rule in enumerate(outputs):
        call = next((c for c in calls if _layout_flaw(regime_of(rule, c), c, i)), None)
        if call is not None:
            out = call.outputs[i]
            inputs = ", ".join(f"{a.name} {list(a.tensor.shape)} strides "
                               f"{list(a.tensor.strides)}" for a in call.args if a.tensor)
            found.append(f"output {i}'s strides {list(out.strides)} at {inputs} follow no "
                         "layout rule the other calls fit")
    return found


def _unsettled(outputs: Sequence[OutputRule], notes: Sequence[str]) -> bool:
    """A size no formula fits that no call showed following the data, or an output fitted
    on one of the ranks it came in: what a guard on the input's rank may settle."""
    return any(map(_unshown, outputs)) or any(ONE_RANK in n or LAYOUT_MIXED in n
                                               for n in notes)


def _layout_only(outputs: Sequence[OutputRule], notes: Sequence[str]) -> bool:
    """What the rule over every call leaves unsettled is an output's layout, not a size."""
    return not any(map(_unshown, outputs)) and not any(ONE_RANK in n for n in notes)


def _unshown(out: OutputRule) -> bool:
    """A size of `out` no formula fits that no call showed following the data."""
    return any(isinstance(e, Unbacked) and not e.data_dependent for e in out.sizes())


def _rank_guarded(calls: Sequence[ObservedCall], count: int, optional: Sequence[str],
                  layout_only: bool
                  ) -> tuple[RankGuard, list[ObservedCall], list[OutputRule], list[str]] | None:
    """Where an output size fits no formula over all calls, but does over the calls whose
    tensor argument has the ranks the samples gave it (a kernel coherent only for 2-D
    input, which broadcasts a 3-D one into garbage): the guard, those calls, their rules
    and notes. Never a size the data decides: that one is no rank's fault. `layout_only`:
    over every call only a layout was unsettled, which the guard's reason says."""
    for arg in _tensor_args(calls):
        ranks = {len(c.arg(arg).tensor.shape) for c in calls}
        given = {len(c.arg(arg).tensor.shape) for c in calls if c.phase != VARIATION}
        if len(ranks) < 2 or not given or given == ranks:
            continue
        kept = [c for c in calls if len(c.arg(arg).tensor.shape) in given]
        notes: list[str] = []
        outputs = [_output(kept, i, notes, optional) for i in range(count)]
        if _unsettled(outputs, notes):
            continue
        other = next(c for c in calls if c not in kept)
        rank = len(other.arg(arg).tensor.shape)
        shown = next((f"output {i} {list(o.shape)}" for i, o in enumerate(other.outputs)
                      if o is not None), "its outputs")
        why = (f"for `{arg}` of rank {rank} the kernel gave {shown} from `{arg}` "
               f"{list(other.arg(arg).tensor.shape)}, which follows no formula of the input "
               "sizes") if not layout_only else (
            f"for `{arg}` of rank {rank} the kernel lays its outputs out otherwise than for "
            f"rank {', '.join(map(str, sorted(given)))}, and no one layout rule covers both")
        return RankGuard(arg, tuple(sorted(given)), why), kept, outputs, notes
    return None
