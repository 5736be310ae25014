"""New calls of an op made from one sample by changing one thing: a size, an int argument or
the float dtype. Meta synthesis observes the real kernel on them to see how output sizes
follow the inputs; the contract-dim probe (which dims an op ties together) reuses them.

Sizes change the way real callers change them: the token count of `x` and of `positions`
move together, so a dim changes in every tensor (and int argument) holding the same size,
and separately alone. New values tile or cut the old ones along the dim, so the values an
index tensor holds (slot mappings, positions) stay in range. A variation the kernel
rejects is no observation; the caller runs each one and keeps the accepted."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from aclcap._compat import OpOverload
from aclcap.meta.observe import bind
from aclcap.meta.sample_inputs import SampleInput

Kind = Literal["values", "dim", "dim-alone", "dim-group", "int", "bool", "none", "float",
               "dtype", "rank", "index-rank", "layout", "tied"]
FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_OTHER_INDEX_DTYPE = {torch.int32: torch.int64, torch.int64: torch.int32}
# Per sample: ~3 sizes x a handful of distinct dims, each shared dim alone, ints, floats,
# each float tensor's dtype alone, ranks and layouts. Every kind gets its turn (kinds are
# interleaved): a real kernel's sample (ten tensors, six distinct sizes) has more dims than
# this, and cutting by kind would leave whole classes (another rank, a dtype pair) unseen.
MAX_VARIATIONS = 128
MAX_BYTES = 256 << 20  # a variation never allocates more than this in all
# Dims that share a size are changed in every subset (that holds the first of them) when
# they are this few: tied groups (q's head dim with k's, v's with the state's) show as the
# subsets the kernel accepts. 5 dims make 14 subsets; more are left to the alone changes.
MAX_GROUP_MEMBERS = 5
VALUES_REDRAWN = "values redrawn"  # the description's end for kind "values"
# The description's ends of the value changes made on purpose (kind "values"): like a
# redraw, a call at the same sizes as another, so the caller never drops it as a repeat.
VALUES_LEAST = "every value its least"
VALUE_HALVED = "its value halved"
SAME_SIZES = (VALUES_REDRAWN, VALUES_LEAST, VALUE_HALVED)
TIED = "tied"  # kind of a variation not made: the dim is tied to an offsets tensor


@dataclass
class Variation:
    """One new call: what changed, in words ("x dim 0, positions dim 0: 33 -> 66")."""

    sample: SampleInput
    description: str
    kind: Kind


@dataclass(frozen=True)
class _Slot:
    """Where a schema argument sits in a SampleInput: args[index], or kwargs[name]."""

    name: str
    index: int | None


def _slots(op: OpOverload, sample: SampleInput) -> list[tuple[Any, _Slot, Any]]:
    """(schema argument, its slot, its value) for every argument the sample passes."""
    return [(arg, _Slot(arg.name, i if i < len(sample.args) else None), value)
            for i, (arg, value) in enumerate(bind(op, sample.args, sample.kwargs))]


def _replace(sample: SampleInput, new: dict[_Slot, Any]) -> SampleInput:
    args = list(sample.args)
    kwargs = dict(sample.kwargs)
    for slot, value in new.items():
        if slot.index is None:
            kwargs[slot.name] = value
        else:
            args[slot.index] = value
    return SampleInput(tuple(args), kwargs)


def _is_int_arg(arg: Any, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and \
        str(arg.type) in ("int", "SymInt", "Optional[int]", "int?", "SymInt?")


def _resize(t: torch.Tensor, dims: Sequence[int], new_size: int) -> torch.Tensor:
    """`t` with each of `dims` tiled or cut to `new_size`, keeping its stride order (a
    transposed input stays transposed): values repeat, so indices stay in range."""
    order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))
    inverse = [order.index(d) for d in range(t.dim())]
    out = t.permute(order)
    for d in dims:
        p = inverse[d]
        old = out.shape[p]
        if old == 0:  # nothing to tile: zeros (an index of 0 is in range wherever any is)
            shape = list(out.shape)
            shape[p] = new_size
            out = out.new_zeros(shape)
            continue
        if new_size > old:
            reps = [1] * out.dim()
            reps[p] = -(-new_size // old)
            out = out.repeat(reps)
        out = out.narrow(p, 0, new_size)
    return out.contiguous().permute(inverse)


def _bytes_after(t: torch.Tensor, dims: Sequence[int], new_size: int) -> int:
    n = t.element_size()
    for d, size in enumerate(t.shape):
        n *= new_size if d in dims else size
    return n


def vary_dim(op: OpOverload, sample: SampleInput, arg: str, dim: int,
             new_size: int, *, alone: bool = False) -> SampleInput | None:
    """The sample with dim `dim` of tensor argument `arg` set to `new_size`, and with it
    every dim of every tensor argument, and every int argument, that had the same size
    (unless `alone`). None where that cannot be made: no such tensor or dim, a size 0
    that cannot be tiled, or more than MAX_BYTES."""
    return _vary_dim(op, sample, arg, dim, new_size, alone)[0]


def _vary_dim(op: OpOverload, sample: SampleInput, arg: str, dim: int,
              new_size: int, alone: bool) -> tuple[SampleInput | None, list[str]]:
    slots = _slots(op, sample)
    target = next((v for a, _, v in slots if a.name == arg), None)
    if not isinstance(target, torch.Tensor) or not -target.dim() <= dim < target.dim():
        return None, []
    dim %= target.dim()
    old = target.shape[dim]
    if new_size < 1:
        return None, []
    new: dict[_Slot, Any] = {}
    changed: list[str] = []
    total = 0
    for a, slot, value in slots:
        if isinstance(value, torch.Tensor):
            dims = [dim] if a.name == arg else []
            if not alone:
                dims = [d for d, s in enumerate(value.shape) if s == old]
            if dims:
                total += _bytes_after(value, dims, new_size)
                new[slot] = (value, dims)
                changed.append(f"{a.name} dim {', '.join(map(str, dims))}")
            else:
                total += value.numel() * value.element_size()
        elif not alone and _is_int_arg(a, value) and value == old:
            new[slot] = new_size
            changed.append(a.name)
    if total > MAX_BYTES:
        return None, []
    resized = {slot: _resize(*v, new_size) if isinstance(v, tuple) else v
               for slot, v in new.items()}
    # Offsets and lengths that describe the changed size follow it; a dim changed alone
    # while such a tensor describes it is a call outside the op's contract: none is made.
    for a, slot, value in slots:
        if slot not in resized and isinstance(value, torch.Tensor):
            follows = _follow(value, old, new_size)
            if follows is not None and alone:
                return None, [TIED]
            if follows is not None:
                resized[slot] = follows
                changed.append(f"{a.name} values")
    return _replace(sample, resized), changed


def _follow(t: torch.Tensor, old: int, new: int) -> torch.Tensor | None:
    """A 1-D int tensor that describes a size `old` as offsets (`cu_seqlens`: rising from
    0 to old) or lengths (`seq_lens`: summing to old), rescaled to describe `new`; None
    for any other tensor. Kernels that trust their offsets (most do) read past the data
    or leave rows unwritten when the two disagree: a call outside the op's contract."""
    if t.dim() != 1 or t.dtype.is_floating_point or t.dtype == torch.bool or t.numel() < 2 \
            or old < 1:
        return None
    values = t.tolist()
    offsets = values[0] == 0 and values[-1] == old and all(
        b >= a for a, b in itertools.pairwise(values))
    if offsets:
        return torch.tensor([v * new // old for v in values], dtype=t.dtype, device=t.device)
    if min(values) >= 0 and sum(values) == old and old > 1:
        ends = [0, *(sum(values[:i + 1]) * new // old for i in range(len(values)))]
        return torch.tensor([b - a for a, b in itertools.pairwise(ends)],
                            dtype=t.dtype, device=t.device)
    return None


def _next_prime(n: int) -> int:
    def prime(k: int) -> bool:
        return k > 1 and all(k % p for p in range(2, int(k ** 0.5) + 1))

    while not prime(n):
        n += 1
    return n


def new_sizes(size: int) -> list[int]:
    """x2, +1 and a prime above both that is neither: sizes that tell n, 2n, n + 1,
    (n + 1) // 2 and ceil(n / b) apart. Never smaller, so index values stay in range. A
    size of 0 (no tokens) grows to 3 and 7: a rule seen only at 0 proves nothing."""
    if size == 0:
        return [3, 7]
    sizes = []
    for s in (size * 2, size + 1, _next_prime(size + 2)):
        if s not in sizes and s != size:
            sizes.append(s)
    return sizes


def _tensor_dims(op: OpOverload, sample: SampleInput
                 ) -> dict[int, list[tuple[str, int]]]:
    """Each distinct dim size -> the (argument, dim) pairs holding it, in schema order."""
    groups: dict[int, list[tuple[str, int]]] = {}
    for a, _, value in _slots(op, sample):
        if isinstance(value, torch.Tensor):
            for d, s in enumerate(value.shape):
                groups.setdefault(s, []).append((a.name, d))
    return groups


def _shared_dim_variations(op: OpOverload, sample: SampleInput,
                           sizes: Callable[[int], list[int]] = new_sizes
                           ) -> Iterator[Variation]:
    """Each distinct size changed (to each of `sizes(size)`) in every tensor (and int
    argument) holding it."""
    for size, members in _tensor_dims(op, sample).items():
        arg, dim = members[0]
        for new_size in sizes(size):
            varied, changed = _vary_dim(op, sample, arg, dim, new_size, alone=False)
            if varied is not None:
                yield Variation(varied, f"{', '.join(changed)}: {size} -> {new_size}", "dim")


def _edge_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Each distinct size made 1 in every tensor (and int argument) holding it: one token is
    where kernels take fast paths (a slice returned as a view, a squeezed dim), and where
    torch specializes sizes; a rule never seen at 1 is unproven there. Not where an
    integer tensor holds values past 0: they may index the dim shrunk (slots into a cache
    of blocks), and a kernel that checks nothing would write past it."""
    if any(isinstance(v, torch.Tensor) and not v.is_floating_point() and not v.is_complex()
           and v.numel() and int(v.max()) > 0 for _, _, v in _slots(op, sample)):
        return
    yield from _shared_dim_variations(op, sample, lambda size: [1] if size > 1 else [])


def _odd_variation(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Every even size of the first tensor made odd at once (with every tensor sharing it):
    one size changed at a time keeps a numel even, and then (numel + 1) // 2 and
    numel // 2 (packed 4-bit storage) look alike."""
    first = next((v for _, _, v in _slots(op, sample) if isinstance(v, torch.Tensor)
                  and v.dim() > 0), None)
    if first is None:
        return
    arg = next(a.name for a, _, v in _slots(op, sample) if v is first)
    varied: SampleInput | None = sample
    evens = [(d, size) for d, size in enumerate(first.shape) if size > 0 and size % 2 == 0]
    for d, size in evens:
        varied = vary_dim(op, varied, arg, d, size + 1) if varied is not None else None
    if evens and varied is not None:
        yield Variation(varied, f"{arg}: every even size made odd", "dim")


def _alone_dim_variations(op: OpOverload, sample: SampleInput
                          ) -> Iterator[Variation]:
    """Each dim that shares its size with another changed alone: tells tied dims (the
    kernel rejects the call) from independent ones (equal head dims of q and v)."""
    for size, members in _tensor_dims(op, sample).items():
        if len(members) < 2 or size < 1:
            continue
        for arg, dim in members:
            new_size = size * 2
            varied, why = _vary_dim(op, sample, arg, dim, new_size, alone=True)
            what = f"{arg} dim {dim} alone: {size} -> {new_size}"
            if varied is not None:
                yield Variation(varied, what, "dim-alone")
            elif why == [TIED]:  # no call: offsets describe this dim, which ties it
                yield Variation(sample, what, TIED)


def _group_dim_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Dims that share a size changed in subsets, the rest kept: where the kernel rejects
    each dim changed alone (q's head dim is tied to k's, v's to the state's), only a whole
    group changed tells which dim an output follows (q's head dim or v's)."""
    for size, members in _tensor_dims(op, sample).items():
        if size < 1 or not 3 <= len(members) <= MAX_GROUP_MEMBERS or \
                len({arg for arg, _ in members}) < 2:
            continue
        first, rest = members[0], members[1:]
        for count in range(1, len(rest)):
            for chosen in itertools.combinations(rest, count):
                group = [first, *chosen]
                varied = _vary_group(op, sample, group, size * 2)
                if varied is not None:
                    names = ", ".join(f"{arg} dim {dim}" for arg, dim in group)
                    yield Variation(varied, f"{names} together: {size} -> {size * 2}",
                                    "dim-group")


def _vary_group(op: OpOverload, sample: SampleInput, group: Sequence[tuple[str, int]],
                new_size: int) -> SampleInput | None:
    """The sample with exactly the dims of `group` set to `new_size`; None where an offsets
    tensor describes that size (the call is outside the op's contract) or past MAX_BYTES."""
    slots = _slots(op, sample)
    old = next(v.shape[d] for a, _, v in slots for arg, d in group if a.name == arg)
    new: dict[_Slot, Any] = {}
    total = 0
    for a, slot, value in slots:
        if not isinstance(value, torch.Tensor):
            continue
        dims = [d for arg, d in group if arg == a.name]
        if dims:
            total += _bytes_after(value, dims, new_size)
            new[slot] = _resize(value, dims, new_size)
        elif _follow(value, old, new_size) is not None:
            return None
    return _replace(sample, new) if total <= MAX_BYTES else None


def _max_rank(op: OpOverload, sample: SampleInput) -> int:
    return max((v.dim() for _, _, v in _slots(op, sample) if isinstance(v, torch.Tensor)),
               default=0)


def _int_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Int arguments and elements of int[] arguments, x2, +1 and halved (0 only +1;
    negative values are sentinels such as -1 and stay). An int that could index the tensors' dims
    (-rank <= value < rank) also takes every other such value: a `dim` argument varied
    over all of them shows rules along it (`[*x.shape[:dim], n, *x.shape[dim:][1:]]`)."""
    rank = _max_rank(op, sample)
    for a, slot, value in _slots(op, sample):
        if _is_int_arg(a, value) and -rank <= value < rank:
            for new in range(-rank, rank):
                if new != value:
                    yield Variation(_replace(sample, {slot: new}),
                                    f"{a.name}: {value} -> {new}", "int")
        if _is_int_arg(a, value) and value >= 0:
            # halved too: a bit rate seen at 4 and 8 only fits `ceil(bits / 4) * C // 2`
            # as well as `C * bits // 8`, which 2 tells apart (fbgemm's n-bit rows)
            for new in dict.fromkeys((value * 2, value + 1, *((value // 2,) if value > 2
                                                               else ()))):
                if new != value and not (-rank <= new < rank):
                    yield Variation(_replace(sample, {slot: new}),
                                    f"{a.name}: {value} -> {new}", "int")
        elif str(a.type).startswith(("List[int]", "int[]", "SymInt[]", "List[SymInt]")) and \
                isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                if isinstance(v, int) and v >= 0:
                    for new in dict.fromkeys((v * 2, v + 1)):
                        if new != v:
                            changed = [*value[:i], new, *value[i + 1:]]
                            yield Variation(_replace(sample, {slot: type(value)(changed)}),
                                            f"{a.name}[{i}]: {v} -> {new}", "int")


def _bool_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Each bool argument flipped (`keepdim`): an output that keeps a dim only where it is
    True shows it."""
    for a, slot, value in _slots(op, sample):
        if isinstance(value, bool):
            yield Variation(_replace(sample, {slot: not value}),
                            f"{a.name}: {value} -> {not value}", "bool")


def _left_out(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Each optional argument the sample gives, left out (None): `dim_size` given and None
    are two regimes of one op (a size from the argument, or one that follows the data), as
    are `out` given (the output is `out`) and None, and a `dtype` given or defaulted."""
    for a, slot, value in _slots(op, sample):
        if value is not None and str(a.type).startswith("Optional["):
            yield Variation(_replace(sample, {slot: None}), f"{a.name}: given -> None", "none")


def _none_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Each optional argument left out (_left_out), then with other values too."""
    for variation in _left_out(op, sample):
        yield from _and_redrawn(op, variation)


def _regime_layout_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Every tensor's other layouts (_layout_variations) again in each other regime a
    variation opens: an optional argument left out, a float zeroed or negated, a bool
    flipped. A kernel that keeps its input's layout in one regime only (`x.clone()` where
    `limit` is None, `zeros_like` at temperature 0) shows it only there; its samples, all
    in the other regime, never did (issue 58)."""
    regimes = itertools.chain(_left_out(op, sample), _float_changes(op, sample),
                              _bool_variations(op, sample))
    for regime in regimes:
        for laid in _layout_variations(op, regime.sample):
            yield Variation(laid.sample, f"{regime.description}, {laid.description}",
                            "layout")


def _and_redrawn(op: OpOverload, variation: Variation) -> Iterator[Variation]:
    """The variation, then the same with other values: where it opens another regime (a
    size from the data once `dim_size` is None, outlier columns once `threshold` > 0), the
    two calls show whether that size follows the data."""
    yield variation
    for redrawn in itertools.chain(_values_variation(op, variation.sample),
                                   _read_values_variations(op, variation.sample)):
        yield Variation(redrawn.sample, f"{variation.description}, {redrawn.description}",
                        variation.kind)


def _index_rank_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Each integer tensor alone with a leading dim of 2 added: an index tensor's rank
    carries into the output (`x[idx]` is `[*idx.shape, *x.shape[1:]]`)."""
    for a, slot, value in _slots(op, sample):
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and not \
                value.is_floating_point() and value.dtype != torch.bool and \
                value.numel() * value.element_size() * 2 <= MAX_BYTES:
            added = value.unsqueeze(0).repeat(2, *([1] * value.dim()))
            yield Variation(_replace(sample, {slot: added}),
                            f"{a.name} alone: a leading dim of 2 added", "index-rank")


def _float_changes(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Float arguments negated and zeroed (0 becomes 1 and -1)."""
    for a, slot, value in _slots(op, sample):
        if isinstance(value, float):
            for new in (-value, 0.0) if value else (1.0, -1.0):
                yield Variation(_replace(sample, {slot: new}), f"{a.name}: {value:g} -> "
                                f"{new:g}", "float")


def _float_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Float arguments changed (_float_changes), then with other values too: where an
    optional output depends on one (`None if scale_ub > 0`), these calls tell `> 0` from
    `!= 0`."""
    for variation in _float_changes(op, sample):
        yield from _and_redrawn(op, variation)


def _dtype_variations(op: OpOverload, sample: SampleInput,
                      dtypes: Sequence[torch.dtype]) -> Iterator[Variation]:
    """The sample's main float dtype (the most common among its tensors) swapped for each
    other one, in those tensors only: float32 scales next to bfloat16 activations stay;
    each ScalarType argument set to each other float dtype; and the index dtypes swapped."""
    slots = _slots(op, sample)
    floats = [v.dtype for _, _, v in slots if isinstance(v, torch.Tensor) and
              v.is_floating_point()]
    if floats:
        main = max(dict.fromkeys(floats), key=floats.count)
        for dtype in dtypes:
            if dtype == main:
                continue
            new = {slot: v.to(dtype) for a, slot, v in slots
                   if isinstance(v, torch.Tensor) and v.dtype == main}
            names = ", ".join(s.name for s in new)
            yield Variation(_replace(sample, new),
                            f"{names}: {_name(main)} -> {_name(dtype)}", "dtype")
    for a, slot, value in slots:
        if isinstance(value, torch.dtype):
            for dtype in dtypes:
                if dtype != value:
                    yield Variation(_replace(sample, {slot: dtype}),
                                    f"{a.name}: {_name(value)} -> {_name(dtype)}", "dtype")
    yield from _index_dtype_variations(sample, slots)
    # each float tensor alone: an output that promotes over two inputs, or follows one of
    # two that always shared a dtype, shows only when their dtypes differ
    if len(floats) > 1:
        for a, slot, value in slots:
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                for dtype in dtypes:
                    if dtype != value.dtype:
                        yield Variation(_replace(sample, {slot: value.to(dtype)}),
                                        f"{a.name} alone: {_name(value.dtype)} -> "
                                        f"{_name(dtype)}", "dtype")


def _index_dtype_variations(sample: SampleInput, slots: list) -> Iterator[Variation]:
    """Every int32 or int64 tensor as the other index dtype, all together, then each alone
    where there are several: kernels dispatch over both (fbgemm's AT_DISPATCH_INDEX_TYPES),
    and an output that follows its lengths' dtype is told from a fixed int32 only so
    (fbgemm's cumsums were fitted int32 from a step that passed int32 alone)."""
    index = [(a, slot, v) for a, slot, v in slots if isinstance(v, torch.Tensor)
             and v.dtype in _OTHER_INDEX_DTYPE]
    if index:
        names = ", ".join(a.name for a, _, _ in index)
        first = index[0][2].dtype
        change = (f"{_name(first)} -> {_name(_OTHER_INDEX_DTYPE[first])}"
                  if all(v.dtype == first for _, _, v in index) else "int32 <-> int64")
        yield Variation(_replace(sample, {slot: v.to(_OTHER_INDEX_DTYPE[v.dtype])
                                          for _, slot, v in index}), f"{names}: {change}",
                        "dtype")
    for a, slot, v in index if len(index) > 1 else ():
        other = _OTHER_INDEX_DTYPE[v.dtype]
        yield Variation(_replace(sample, {slot: v.to(other)}),
                        f"{a.name} alone: {_name(v.dtype)} -> {_name(other)}", "dtype")


def _values_variation(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """The same shapes with other values: each tensor's elements drawn again from its own
    (with replacement, seeded), so index values stay valid while counts change. An
    output size that differs between the two calls follows the data."""
    generator = torch.Generator().manual_seed(0)
    new = {}
    for _, slot, value in _slots(op, sample):
        if isinstance(value, torch.Tensor) and value.numel() > 1:
            flat = value.reshape(-1)
            if not flat.is_floating_point() and flat.unique().numel() > 1:
                # integers from their lower half: a size that is the max + 1 (a scatter's
                # output without `dim_size`) moves, and indices stay in range
                flat = flat[flat <= flat.float().median()]
            picks = torch.randint(0, flat.numel(), (value.numel(),), generator=generator)
            new[slot] = flat[picks.to(flat.device)].reshape(value.shape).clone()
    if new:
        yield Variation(_replace(sample, new),
                        f"{', '.join(s.name for s in new)}: {VALUES_REDRAWN}", "values")


def _read_values_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Each tensor a kernel may read as values, changed alone at the same shapes: an
    integer tensor with every element its least (the max of an index or offsets tensor
    sizes an output: a scatter without `dim_size`, a sampler's `ptr`), a one-element
    tensor's value halved (a `ratio` the output count follows). A redraw shows a size that
    follows the data only where its draw moves it; these move it on purpose, so one call
    lost to a crash or an unlucky draw never turns a data-dependent size into a formula."""
    for a, slot, value in _slots(op, sample):
        if not isinstance(value, torch.Tensor) or value.dtype == torch.bool:
            continue
        if value.numel() == 1:
            v = value.item()
            if value.is_floating_point():
                new = torch.full_like(value, v / 2 if v else 0.5)
            elif v >= 2:
                new = torch.full_like(value, v // 2)
            else:
                continue
            yield Variation(_replace(sample, {slot: new}), f"{a.name}: {VALUE_HALVED}",
                            "values")
        elif not value.is_floating_point() and value.numel() > 1 and \
                value.unique().numel() > 1:
            yield Variation(_replace(sample, {slot: torch.full_like(value, value.min())}),
                            f"{a.name}: {VALUES_LEAST}", "values")


def _rank_variations(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """The tensors that share the leading (token) dim of the first tensor of rank 2 or more,
    with a leading dim added, their first two dims merged, or their leading dim dropped:
    an op that keeps any rank (`x.shape`, `x.numel() // x.shape[-1]`) shows it here."""
    slots = _slots(op, sample)
    tensors = [(a, slot, v) for a, slot, v in slots if isinstance(v, torch.Tensor)]
    lead = next((v.shape[0] for _, _, v in tensors if v.dim() >= 2), None)
    group = [(a, slot, v) for a, slot, v in tensors if v.dim() >= 2 and v.shape[0] == lead]
    if not group:
        return
    names = ", ".join(a.name for a, _, _ in group)
    # a dim of 2 after the leading one keeps the rows, so per-row tensors (an index, stats)
    # still describe them: a scatter of [E, C] messages by a 1-D index takes [E, H, C] too
    inserted = {slot: v.unsqueeze(1).repeat(1, 2, *([1] * (v.dim() - 1))) for _, slot, v in group}
    if sum(t.numel() * t.element_size() for t in inserted.values()) <= MAX_BYTES:
        yield Variation(_replace(sample, inserted), f"{names}: a dim of 2 inserted after the "
                        "leading one", "rank")
    if any(lead in v.shape for _, _, v in tensors if all(v is not g for *_, g in group)):
        return  # another tensor describes those rows (per-row stats, positions): no more
    added: dict[_Slot, Any] = {slot: v.unsqueeze(0).repeat(3, *([1] * v.dim()))
                               for _, slot, v in group}
    if sum(t.numel() * t.element_size() for t in added.values()) <= MAX_BYTES:
        added |= _dims_moved(slots, max(v.dim() for _, _, v in group))
        yield Variation(_replace(sample, added), f"{names}: a leading dim of 3 added", "rank")
    if all(v.dim() >= 3 for _, _, v in group):
        merged = {slot: v.reshape(v.shape[0] * v.shape[1], *v.shape[2:]).clone()
                  for _, slot, v in group}
        yield Variation(_replace(sample, merged), f"{names}: dims 0 and 1 merged", "rank")
    if lead:
        dropped = {slot: v[0].clone() for _, slot, v in group}
        yield Variation(_replace(sample, dropped), f"{names}: leading dim dropped", "rank")


def _dims_moved(slots: list, rank: int) -> dict[_Slot, int]:
    """Each int that could name a dim from the front of a tensor of `rank` (`dim=0`), one
    higher: where a leading dim is added, it names the same dim. Run along the new dim
    instead, a scatter writes past its output (torch-scatter checks no index) and corrupts
    the worker's heap, and the next calls there crash or read as written."""
    return {slot: v + 1 for a, slot, v in slots if _is_int_arg(a, v) and 0 <= v < rank}


def _batch_variation(op: OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Every tensor with a leading dim of 2 added together: a kernel batched over leading
    dims (a segment reduction whose offsets tensor gains the batch dim its values have)
    takes it where no tensor alone with one added could be, and shows which tensor's rank
    places the dim it runs along (`_dims_moved`)."""
    slots = _slots(op, sample)
    tensors = {slot: v for _, slot, v in slots if isinstance(v, torch.Tensor) and v.dim() >= 1}
    if len(tensors) < 2 or sum(v.numel() * v.element_size() for v in tensors.values()) * 2 \
            > MAX_BYTES:
        return
    added: dict[_Slot, Any] = {slot: v.unsqueeze(0).repeat(2, *([1] * v.dim()))
                               for slot, v in tensors.items()}
    added |= _dims_moved(slots, max(v.dim() for v in tensors.values()))
    yield Variation(_replace(sample, added), "every tensor: a leading dim of 2 added", "rank")


def _layout_variations(op: OpOverload, sample: SampleInput
                       ) -> Iterator[Variation]:
    """Each tensor of rank 2 or more, same shape and values, laid out otherwise: its last two
    dims transposed in memory, rows strided (a slice of a wider tensor), channels-last for
    rank 4. A kernel that keeps its input's layout shows it; one that needs contiguous
    inputs rejects these, and is then no worse off."""
    for a, slot, v in _slots(op, sample):
        if not isinstance(v, torch.Tensor) or v.dim() < 2 or min(v.shape[-2:]) < 2:
            continue
        transposed = v.transpose(-1, -2).contiguous().transpose(-1, -2)
        yield Variation(_replace(sample, {slot: transposed}), f"{a.name}: transposed in "
                        "memory", "layout")
        wide = torch.cat([v, v], dim=-1)
        yield Variation(_replace(sample, {slot: wide.narrow(-1, 0, v.shape[-1])}),
                        f"{a.name}: strided rows", "layout")
        if v.dim() == 4:
            yield Variation(_replace(sample, {slot: v.contiguous(
                memory_format=torch.channels_last)}), f"{a.name}: channels-last", "layout")


Outputs = list[tuple[tuple[int, ...], torch.dtype] | None]


def supplied(op: OpOverload, sample: SampleInput, outputs_of: Callable[[], Outputs | None]
             ) -> Iterator[Variation]:
    """Each optional argument the sample leaves None, given: a `Tensor?` a tensor of each
    output's shape and dtype (an `out=` of the right shape), and of output 0's with its
    first dim one longer (a size that then follows `out`, not the data); an `int?` each of
    output 0's dim sizes, and one more than the largest (a `dim_size`). `outputs_of()`:
    the (shape, dtype) of each output of the sample's own call, asked only where an
    argument is left None. A step that never passes `out=` showed one regime only, and the
    fake of the other was a guess (torch-scatter's `scatter_max` given `out` returns `out`
    itself, issue 58)."""
    left = [(a, slot) for a, slot, value in _slots(op, sample)
            if value is None and str(a.type).startswith("Optional[")]
    outputs = outputs_of() if left else None
    shapes = [o for o in outputs or [] if o is not None]
    for a, slot in left:
        if str(a.type) == "Optional[Tensor]":
            made = [(shape, dtype) for shape, dtype in dict.fromkeys(shapes)]
            if shapes and shapes[0][0]:
                shape, dtype = shapes[0]
                made.append(((shape[0] + 1, *shape[1:]), dtype))
            for shape, dtype in made:
                tensor = torch.zeros(shape, dtype=dtype, device=_device(sample))
                yield Variation(_replace(sample, {slot: tensor}),
                                f"{a.name}: None -> a tensor of {list(shape)}", "none")
        elif str(a.type) in ("Optional[int]", "Optional[SymInt]") and shapes:
            sizes = sorted(set(shapes[0][0]))
            for new in dict.fromkeys([*sizes[:2], *([sizes[-1] + 1] if sizes else [])]):
                yield Variation(_replace(sample, {slot: new}), f"{a.name}: None -> {new}",
                                "none")


def _device(sample: SampleInput) -> torch.device:
    """Where the sample's tensors live (cpu where it has none)."""
    return next((v.device for v in (*sample.args, *sample.kwargs.values())
                 if isinstance(v, torch.Tensor)), torch.device("cpu"))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def variations(op: OpOverload, sample: SampleInput,
               dtypes: Sequence[torch.dtype] = FLOAT_DTYPES,
               limit: int = MAX_VARIATIONS) -> Iterator[Variation]:
    """Every variation of `sample`, at most `limit`: the values redrawn, then each kind
    in turn (shared dims, dims alone and the rest), one of each kind per round, so that a
    sample with many dims still has its dtypes, ranks and layouts varied. The sample
    itself is left untouched."""
    kinds = [_values_variation(op, sample), _read_values_variations(op, sample),
             _shared_dim_variations(op, sample),
             _odd_variation(op, sample),
             _alone_dim_variations(op, sample), _edge_variations(op, sample),
             _int_variations(op, sample),
             _bool_variations(op, sample), _none_variations(op, sample),
             _dtype_variations(op, sample, dtypes), _rank_variations(op, sample),
             _index_rank_variations(op, sample), _batch_variation(op, sample),
             _group_dim_variations(op, sample),
             _layout_variations(op, sample), _float_variations(op, sample),
             _regime_layout_variations(op, sample)]
    produced = 0
    while kinds:
        for made in list(kinds):
            variation = next(made, None)
            if variation is None:
                kinds.remove(made)
                continue
            if produced == limit:
                return
            produced += 1
            yield variation
