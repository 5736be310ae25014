"""New calls of an op made from one sample by changing one thing: a size, an int argument or
the float dtype. Meta synthesis observes the real kernel on them to see how output sizes
follow the inputs; the contract-dim probe (which dims an op ties together) reuses them.

Sizes change the way real callers change them: the token count of `x` and of `positions`
move together, so a dim changes in every tensor (and int argument) holding the same size,
and separately alone. New values tile or cut the old ones along the dim, so the values an
index tensor holds (slot mappings, positions) stay in range. A variation the kernel
rejects is no observation; the caller runs each one and keeps the accepted."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from aclcap.meta.observe import bind
from aclcap.meta.sample_inputs import SampleInput

Kind = Literal["values", "dim", "dim-alone", "int", "float", "dtype"]
FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MAX_VARIATIONS = 40  # per sample: ~3 sizes x a handful of distinct dims, ints and dtypes
MAX_BYTES = 256 << 20  # a variation never allocates more than this in all
VALUES_REDRAWN = "values redrawn"  # the description's end for kind "values"


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


def _slots(op: torch._ops.OpOverload, sample: SampleInput) -> list[tuple[Any, _Slot, Any]]:
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


def vary_dim(op: torch._ops.OpOverload, sample: SampleInput, arg: str, dim: int,
             new_size: int, *, alone: bool = False) -> SampleInput | None:
    """The sample with dim `dim` of tensor argument `arg` set to `new_size`, and with it
    every dim of every tensor argument, and every int argument, that had the same size
    (unless `alone`). None where that cannot be made: no such tensor or dim, a size 0
    that cannot be tiled, or more than MAX_BYTES."""
    return _vary_dim(op, sample, arg, dim, new_size, alone)[0]


def _vary_dim(op: torch._ops.OpOverload, sample: SampleInput, arg: str, dim: int,
              new_size: int, alone: bool) -> tuple[SampleInput | None, list[str]]:
    slots = _slots(op, sample)
    target = next((v for a, _, v in slots if a.name == arg), None)
    if not isinstance(target, torch.Tensor) or not -target.dim() <= dim < target.dim():
        return None, []
    dim %= target.dim()
    old = target.shape[dim]
    if old == 0 or new_size < 1:
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
    return _replace(sample, resized), changed


def _next_prime(n: int) -> int:
    def prime(k: int) -> bool:
        return k > 1 and all(k % p for p in range(2, int(k ** 0.5) + 1))

    while not prime(n):
        n += 1
    return n


def new_sizes(size: int) -> list[int]:
    """x2, +1 and a prime above both that is neither: sizes that tell n, 2n, n + 1,
    (n + 1) // 2 and ceil(n / b) apart. Never smaller, so index values stay in range."""
    sizes = []
    for s in (size * 2, size + 1, _next_prime(size + 2)):
        if s not in sizes and s != size:
            sizes.append(s)
    return sizes


def _tensor_dims(op: torch._ops.OpOverload, sample: SampleInput
                 ) -> dict[int, list[tuple[str, int]]]:
    """Each distinct dim size -> the (argument, dim) pairs holding it, in schema order."""
    groups: dict[int, list[tuple[str, int]]] = {}
    for a, _, value in _slots(op, sample):
        if isinstance(value, torch.Tensor):
            for d, s in enumerate(value.shape):
                if s > 0:
                    groups.setdefault(s, []).append((a.name, d))
    return groups


def _dim_variations(op: torch._ops.OpOverload, sample: SampleInput) -> Iterator[Variation]:
    groups = _tensor_dims(op, sample)
    for size, members in groups.items():
        arg, dim = members[0]
        for new_size in new_sizes(size):
            varied, changed = _vary_dim(op, sample, arg, dim, new_size, alone=False)
            if varied is not None:
                yield Variation(varied, f"{', '.join(changed)}: {size} -> {new_size}", "dim")
    for size, members in groups.items():
        if len(members) < 2:
            continue
        for arg, dim in members:
            new_size = size * 2
            varied, _ = _vary_dim(op, sample, arg, dim, new_size, alone=True)
            if varied is not None:
                yield Variation(varied, f"{arg} dim {dim} alone: {size} -> {new_size}",
                                "dim-alone")


def _int_variations(op: torch._ops.OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Int arguments and elements of int[] arguments, x2 and +1 (0 only +1; negative
    values are sentinels such as -1 and stay)."""
    for a, slot, value in _slots(op, sample):
        if _is_int_arg(a, value) and value >= 0:
            for new in dict.fromkeys((value * 2, value + 1)):
                if new != value:
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


def _float_variations(op: torch._ops.OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """Float arguments negated and zeroed (0 becomes 1 and -1): where an optional output
    depends on one (`None if scale_ub > 0`), these calls tell `> 0` from `!= 0`."""
    for a, slot, value in _slots(op, sample):
        if isinstance(value, float):
            for new in (-value, 0.0) if value else (1.0, -1.0):
                yield Variation(_replace(sample, {slot: new}), f"{a.name}: {value:g} -> {new:g}",
                                "float")


def _dtype_variations(op: torch._ops.OpOverload, sample: SampleInput,
                      dtypes: Sequence[torch.dtype]) -> Iterator[Variation]:
    """The sample's main float dtype (the most common among its tensors) swapped for each
    other one, in those tensors only: float32 scales next to bfloat16 activations stay;
    and each ScalarType argument set to each other float dtype."""
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


def _values_variation(op: torch._ops.OpOverload, sample: SampleInput) -> Iterator[Variation]:
    """The same shapes with other values: each tensor's elements drawn again from its own
    (with replacement, seeded), so index values stay valid while counts change. An
    output size that differs between the two calls follows the data."""
    generator = torch.Generator().manual_seed(0)
    new = {}
    for _, slot, value in _slots(op, sample):
        if isinstance(value, torch.Tensor) and value.numel() > 1:
            flat = value.reshape(-1)
            picks = torch.randint(0, flat.numel(), (flat.numel(),), generator=generator)
            new[slot] = flat[picks.to(flat.device)].reshape(value.shape).clone()
    if new:
        yield Variation(_replace(sample, new),
                        f"{', '.join(s.name for s in new)}: {VALUES_REDRAWN}", "values")


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def variations(op: torch._ops.OpOverload, sample: SampleInput,
               dtypes: Sequence[torch.dtype] = FLOAT_DTYPES,
               limit: int = MAX_VARIATIONS) -> Iterator[Variation]:
    """Every variation of `sample`, in a fixed order (values, shared dims, dims alone,
    ints, floats, dtypes), at most `limit`. The sample itself is left untouched."""
    produced = 0
    for made in (_values_variation(op, sample), _dim_variations(op, sample),
                 _int_variations(op, sample), _float_variations(op, sample),
                 _dtype_variations(op, sample, dtypes)):
        for variation in made:
            if produced == limit:
                return
            produced += 1
            yield variation
