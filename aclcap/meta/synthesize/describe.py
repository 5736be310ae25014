"""An OpRule in words, for check-meta's report and JSON: "out 0: [x.shape[0], w.shape[0]],
dtype of x, contiguous; writes `cache` (schema marks it `!`)". Sizes read as the emitted
Python computes them."""

from __future__ import annotations

from aclcap.meta.synthesize.emit_python import expr_source, shape_parts
from aclcap.meta.synthesize.rules import (
    AlongDim,
    DtypeRule,
    LeadingDims,
    OpRule,
    OutputRule,
    Unbacked,
    WholeShape,
)


def _size(e: object) -> str:
    if isinstance(e, LeadingDims):
        return f"*{e.arg}.shape" + (f"[:-{e.drop}]" if e.drop else "")
    if isinstance(e, Unbacked):
        what = "data-dependent" if e.data_dependent else "no formula fits"
        return f"{what} ({e.min_seen}..{e.max_seen} seen)"
    return expr_source(e)  # type: ignore[arg-type]


def _dtype(rule: DtypeRule | None) -> str:
    if rule is None:
        return "dtype unknown"
    if rule.kind == "fixed":
        return str(rule.dtype)
    if rule.kind == "like":
        return f"dtype of {rule.arg}"
    if rule.kind == "arg":
        return f"dtype given by `{rule.arg}`"
    return f"dtype promoted over {', '.join(rule.args)}"


def describe_output(index: int, out: OutputRule) -> str:
    if out.shape is None:
        return f"out {index}: always None"
    if out.given is not None:
        arg, given, absent = out.given
        where = "is given" if out.given_test == "is not None" else out.given_test
        return (f"{describe_output(index, given)} where `{arg}` {where}; else "
                + describe_output(index, absent).split(": ", 1)[1])
    if isinstance(out.shape, WholeShape):
        shape = f"shape given by `{out.shape.arg}`"
    elif isinstance(out.shape, AlongDim):  # the middle in words, as _size says it
        parts = shape_parts(out)
        if out.shape.middle and out.shape.keepdim is None:
            parts[1:-1] = [_size(e) for e in out.shape.middle]
        shape = "[" + ", ".join(parts) + "]"
    else:
        shape = "[" + ", ".join(_size(e) for e in out.shape) + "]"
    parts = [shape]
    if out.alias.kind == "input":
        parts = [f"`{out.alias.arg}` itself"]
    elif out.alias.kind == "view":
        parts.append(f"a view of `{out.alias.arg}`")
    else:
        parts.append(_dtype(out.dtype))
        parts.append("contiguous" if out.layout.kind == "contiguous" else
                     f"stride order of {out.layout.arg}" + (
                         f" where it has rank {', '.join(map(str, out.layout.ranks))}, "
                         "else contiguous" if out.layout.ranks else "")
                     if out.layout.kind == "like" else
                     f"dims laid out in order {list(out.layout.order)}")
    if out.none_when is not None:
        parts.append(f"None when {out.none_when[0]} {out.none_when[1]}")
    return f"out {index}: " + ", ".join(parts)


def describe_rule(rule: OpRule) -> list[str]:
    """One line per output, then what it writes against the schema's `!` marks."""
    lines = [describe_output(i, o) for i, o in enumerate(rule.outputs)] or ["returns ()"]
    marked = {a.name for a in rule.schema_spec().args if a.write}
    writes = [f"`{w}` (schema marks it `!`)" if w in marked else
              f"`{w}` (schema does NOT mark it `!`)" for w in rule.writes]
    if writes:
        lines[-1] += "; writes " + ", ".join(writes)
    guard = rule.rank_guard
    if guard is not None:
        lines[-1] += (f"; for `{guard.arg}` of rank {' or '.join(map(str, guard.ranks))} only "
                      "(torch._check refuses others)")
    if rule.none_only:
        lines[-1] += f"; for {rule.none_only_words()} only (torch._check refuses others)"
    return lines
