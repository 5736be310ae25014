"""OpRules -> a Python module of `torch.library.register_fake` functions, one per op.

Everything stays symbolic: dims are `x.shape[i]`, ceil division is `-(-a // b)`, outputs
come from `x.new_empty(...)`, and a data-dependent size is
`torch.library.get_ctx().new_dynamic_size()`, so the module passes `aclcap check-meta
--lint` and traces with dynamic shapes. Each function carries the evidence it was inferred
from and what verified it (or why not).
"""

from __future__ import annotations

import keyword
import math
import textwrap
from dataclasses import replace

from aclcap.meta.synthesize.rules import (
    AlongDim,
    BinOp,
    Const,
    Dim,
    DtypeRule,
    Expr,
    IntArg,
    ItemSize,
    LayoutRule,
    LeadingDims,
    ListLen,
    Numel,
    OpRule,
    OutputRule,
    TrailingDims,
    Unbacked,
    WholeShape,
)
from aclcap.meta.synthesize.schema import SCALAR_TYPE_DEFAULTS, ArgSpec, OpSchema

_LINE = 100  # the project's ruff line length, which the emitted module keeps too
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "**": 4}

HEADER = '''"""Fake (meta) impls synthesized by `aclcap check-meta --synthesize` from real calls of
each op's kernel.{extra}
"""

import torch
'''

# Stride order of `like` on a tensor of another shape with the same rank: torch's own
# elementwise rule (the one empty_like follows), since new_empty alone is always contiguous.
_LIKE_HELPER = '''

def _empty_in_order_of(like, sizes, dtype):
    """An empty tensor of `sizes` laid out in the stride order of `like` (same rank)."""
    from torch._prims_common import compute_elementwise_output_logical_to_physical_perm

    perm, _ = compute_elementwise_output_logical_to_physical_perm(like)
    inverse = [perm.index(i) for i in range(len(perm))]
    return like.new_empty([sizes[p] for p in perm], dtype=dtype).permute(inverse)
'''


def pyname(name: str) -> str:
    """An argument name usable as a Python parameter (`from` -> `from_`)."""
    return name + "_" if keyword.iskeyword(name) else name


def expr_source(e: Expr | Unbacked | LeadingDims, prec: int = 0) -> str:
    """Python source of an integer expression; parenthesized only where precedence needs."""
    if isinstance(e, Const):
        return str(e.value) if e.value >= 0 or prec == 0 else f"({e.value})"
    if isinstance(e, Dim):
        base = pyname(e.arg) if e.item is None else f"{pyname(e.arg)}[{e.item}]"
        return f"{base}.shape[{e.index}]"
    if isinstance(e, Numel):
        base = pyname(e.arg) if e.item is None else f"{pyname(e.arg)}[{e.item}]"
        return f"{base}.numel()"
    if isinstance(e, IntArg):
        return pyname(e.arg) if e.index is None else f"{pyname(e.arg)}[{e.index}]"
    if isinstance(e, ItemSize):
        return f"{pyname(e.arg)}.element_size()" if e.tensor else f"{pyname(e.arg)}.itemsize"
    if isinstance(e, ListLen):
        return f"len({pyname(e.arg)})"
    if isinstance(e, Unbacked):
        # get_ctx() asked for where the size is needed: on meta tensors it raises, and an
        # op whose data-dependent output is optional must still run there giving None
        return "torch.library.get_ctx().new_dynamic_size()"
    if isinstance(e, LeadingDims):  # only ever first in a shape list: [*x.shape[:-1], ...]
        return f"*{pyname(e.arg)}.shape" + (f"[:-{e.drop}]" if e.drop else "")
    if isinstance(e, TrailingDims):  # only ever last in a shape list: [..., *x.shape[1:]]
        return f"*{pyname(e.arg)}.shape" + (f"[{e.skip}:]" if e.skip else "")
    if not isinstance(e, BinOp):
        raise TypeError(f"not a shape expression: {e!r}")
    if e.op in ("max", "min"):  # max() on SymInts would guard on which is larger
        return (f"torch.sym_{e.op}({expr_source(e.left, 0)}, "
                f"{expr_source(e.right, 0)})")
    if e.op == "ceil//":  # ceil(a / b) on SymInts, without floats: -(-a // b)
        return f"-(-{expr_source(e.left, 3)} // {expr_source(e.right, 3)})"
    if e.op == "**":  # right-associative, binding tighter than unary minus's operand
        text = f"{expr_source(e.left, 5)} ** {expr_source(e.right, 4)}"
        return f"({text})" if prec > 4 else text
    own = _PRECEDENCE[e.op]
    # left-associative: the right operand of - and // needs parentheses at equal precedence
    text = f"{expr_source(e.left, own)} {e.op} {expr_source(e.right, own + 1)}"
    return f"({text})" if own < prec else text


def _dtype_source(rule: DtypeRule | None, base: str) -> str:
    if rule is None or (rule.kind == "like" and rule.arg is None):
        return f"{base}.dtype"
    if rule.kind == "fixed":
        return f"torch.{rule.dtype}"
    if rule.kind == "like":
        return f"{pyname(rule.arg or '')}.dtype"
    if rule.kind == "arg":
        return pyname(rule.arg or "")
    args = [pyname(a) for a in rule.args]
    text = f"{args[0]}.dtype"
    for a in args[1:]:  # torch.result_type takes two operands; promote_types chains
        text = f"torch.promote_types({text}, {a}.dtype)"
    return text


def shape_parts(out: OutputRule) -> list[str]:
    """The source of each element of the output's shape list. Along a `dim` argument,
    `x.shape[dim:][1:]` is what follows that dim for a negative `dim` too."""
    shape = out.shape
    if isinstance(shape, AlongDim):
        x, dim = pyname(shape.arg), shape.dim_source(pyname)
        middle = [expr_source(e) for e in shape.middle]
        if shape.keepdim is not None:
            middle = [f"*([1] if {pyname(shape.keepdim)} else [])"]
        return [f"*{x}.shape[:{dim}]", *middle, f"*{x}.shape[{dim}:][1:]"]
    assert isinstance(shape, tuple)
    return [expr_source(e) for e in shape]


def shape_list(out: OutputRule) -> str:
    """`[x.shape[0], -(-x.numel() // blocksize)]` for a shape of expressions."""
    return "[" + ", ".join(shape_parts(out)) + "]"


def same_shape_as(out: OutputRule, arg: str) -> bool:
    """The shape is exactly `arg`'s: `[*x.shape]`, `[*x.shape[:-1], x.shape[-1]]`, or every
    dim of a rule fitted on one rank (then empty_like, which also keeps x's layout, fits)."""
    shape = out.shape
    if not isinstance(shape, tuple) or not shape:
        return False
    if isinstance(shape[0], LeadingDims):
        lead = shape[0]
        return lead.arg == arg and list(shape[1:]) == [
            Dim(arg, j - lead.drop) for j in range(lead.drop)]
    return all(isinstance(e, Dim) and e.arg == arg and e.item is None
               and e.index in (i, i - len(shape)) for i, e in enumerate(shape))


def _whole_shape(out: OutputRule) -> str | None:
    """The tensor argument whose whole shape the output's is, at any rank (`x` for
    `[*x.shape]`, `[*x.shape[:-1], x.shape[-1]]`); dims alone hold for one rank only."""
    shape = out.shape
    if not isinstance(shape, tuple) or not shape or not isinstance(shape[0], LeadingDims):
        return None
    arg = shape[0].arg
    return pyname(arg) if same_shape_as(out, arg) else None


def output_source(out: OutputRule, base: str, sizes: str | None = None) -> str:
    """The expression that makes one output. `base` is the tensor argument whose device new
    tensors take; `sizes` replaces the shape list (a variable, where the line is long)."""
    if out.shape is None:
        return "None"
    if out.given is not None:  # _output_lines writes regimes as an if statement
        raise ValueError("an output with regimes is no single expression")
    if isinstance(out.shape, WholeShape):
        sizes = pyname(out.shape.arg)
    elif sizes is None:
        sizes = shape_list(out)
    if out.alias.kind == "input":
        text = pyname(out.alias.arg or "")
    elif out.alias.kind == "view":
        text = f"{pyname(out.alias.arg or '')}.view({sizes})"
    else:
        dtype = _dtype_source(out.dtype, base)
        like = out.layout.arg if out.layout.kind == "like" else None
        if like is not None and same_shape_as(out, like):
            same = out.dtype is not None and out.dtype.kind == "like" and out.dtype.arg == like
            text = f"torch.empty_like({pyname(like)})" if same else \
                f"torch.empty_like({pyname(like)}, dtype={dtype})"
        elif like is not None and not isinstance(out.shape, WholeShape):
            text = f"_empty_in_order_of({pyname(like)}, {sizes}, {dtype})"
        elif out.layout.kind == "order" and isinstance(out.shape, tuple):
            order = out.layout.order
            physical = "[" + ", ".join(expr_source(out.shape[d]) for d in order) + "]"
            inverse = ", ".join(str(order.index(d)) for d in range(len(order)))
            text = f"{base}.new_empty({physical}, dtype={dtype}).permute({inverse})"
        else:
            whole = _whole_shape(out)
            sizes = f"{whole}.shape" if whole is not None and sizes == shape_list(out) else sizes
            # the simplest form a reviewer would write: new_empty keeps `base`'s dtype
            text = f"{base}.new_empty({sizes})" if dtype == f"{base}.dtype" else \
                f"{base}.new_empty({sizes}, dtype={dtype})"
    if out.none_when is not None:
        arg, condition = out.none_when
        text = f"None if {pyname(arg)} {condition} else {text}"
    return text


def rank_test(tensor: str, ranks: tuple[int, ...]) -> str:
    """`x.dim() == 2`, or `x.dim() in (2, 3)`."""
    if len(ranks) == 1:
        return f"{tensor}.dim() == {ranks[0]}"
    return f"{tensor}.dim() in ({', '.join(map(str, ranks))})"


def _output_lines(out: OutputRule, base: str, prefix: str, size_name: str) -> list[str]:
    """`    <prefix><output>` (prefix `return ` or `out0 = `), with the shape list hoisted
    into its own wrapped statement `size_name = [...]` where one line would be too long."""
    if out.given is not None:  # two regimes of an argument: an if statement
        arg, given, absent = out.given
        inner = [f"    {line}" for line in _output_lines(given, base, prefix, size_name)]
        rest = [f"    {line}" for line in _output_lines(absent, base, prefix, size_name)]
        return [f"    if {pyname(arg)} {out.given_test}:", *inner, "    else:", *rest]
    if out.layout.ranks:  # the input's stride order at those ranks, contiguous at others
        like = replace(out, layout=replace(out.layout, ranks=()))
        plain = replace(out, layout=LayoutRule("contiguous"))
        test = rank_test(pyname(out.layout.arg or ""), out.layout.ranks)
        return [f"    if {test}:",
                *(f"    {line}" for line in _output_lines(like, base, prefix, size_name)),
                "    else:",
                *(f"    {line}" for line in _output_lines(plain, base, prefix, size_name))]
    line = f"    {prefix}{output_source(out, base)}"
    if len(line) <= _LINE or not isinstance(out.shape, (tuple, AlongDim)) or \
            out.alias.kind == "input":
        return [line]
    parts = shape_parts(out)
    if out.none_when is None:
        return [*_wrap_call(f"{size_name} = [", parts, "]", indent="    "),
                f"    {prefix}{output_source(out, base, sizes=size_name)}"]
    # the sizes only where the output exists: a data-dependent one must not be asked for
    # on a call that returns None (the meta device refuses it)
    arg, condition = out.none_when
    present = replace(out, none_when=None)
    return [f"    if {pyname(arg)} {condition}:", f"        {prefix}None",
            "    else:", *_wrap_call(f"{size_name} = [", parts, "]", indent="        "),
            f"        {prefix}{output_source(present, base, sizes=size_name)}"]


def _wrap_call(head: str, parts: list[str], tail: str, indent: str = "") -> list[str]:
    """`head(a, b):` on one line, or one part per line where that would pass the limit."""
    one = f"{indent}{head}{', '.join(parts)}{tail}"
    if len(one) <= _LINE:
        return [one]
    return [f"{indent}{head}", *(f"{indent}    {p}," for p in parts), f"{indent}{tail.lstrip()}"]


def comment_lines(text: str, indent: str, mark: str, width: int = _LINE) -> list[str]:
    """`text` as comment lines (`mark` is `#` or `//`) within `width`, broken between
    words but never inside a `code span`, [a list] or (a parenthesis) that fits a line,
    and cut to its first line where it carries a traceback."""
    text = text.split("\nTraceback", 1)[0].split("\n", 1)[0]
    room = width - len(indent) - len(mark) - 1
    pieces, current, depth, code = [], "", 0, False
    for word in text.split():
        if current and len(current) + 1 + len(word) > room:  # a unit longer than a line
            pieces += current.split()  # breaks between its words, as plain text does
            current = ""
        current = f"{current} {word}" if current else word
        code ^= word.count("`") % 2 == 1
        depth += sum(word.count(c) for c in "([") - sum(word.count(c) for c in ")]")
        if not code and depth <= 0:
            pieces.append(current)
            current, depth, code = "", 0, False
    if current:
        pieces.append(current)
    lines, line = [], ""
    for piece in pieces:
        if line and len(line) + 1 + len(piece) > room:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    if line:
        lines.append(line)
    return [f"{indent}{mark} {ln}" for ln in lines]


def _comment(text: str, indent: str = "    ") -> list[str]:
    return comment_lines(text, indent, "#")


def evidence_sentences(rule: OpRule) -> list[str]:
    """What the comment above an emitted function says, sentence by sentence (both
    languages): the calls it was inferred from, what it writes, schema defects, notes, and
    what verified it or why it is not verified."""
    out = [f"Inferred from {rule.evidence or f'{rule.fitted_on} calls'}"
           + (f"; fitted on {rule.fitted_on}, held out {rule.held_out}" if rule.fitted_on
              else "") + "."]
    if rule.writes:
        out.append("Writes " + ", ".join(f"`{w}`" for w in rule.writes) + ".")
    out += [f"Schema defect: {d.message}." for d in rule.defects]
    if corrected := rule.corrected_schema():  # one line says every defect's fix at once
        out.append(f"Corrected schema: {corrected}")
    out += [f"Note: {note}" for note in rule.notes]
    if rule.rank_guard is not None:
        guard = rule.rank_guard
        out.append(f"Holds for `{guard.arg}` of rank {' or '.join(map(str, guard.ranks))} "
                   f"only: {guard.why}.")
    if rule.none_only:
        out.append(f"Holds for {rule.none_only_words()} only: no call gave "
                   f"{'it' if len(rule.none_only) == 1 else 'them'}, and an output was None "
                   "in every call.")
    out += [f"Unproven: {what}." for what in rule.unproven]
    verdict = rule.verified
    if verdict is None:
        out.append("Not verified yet: run the battery on calls not used for fitting.")
    elif verdict.startswith("verified"):
        out.append(f"Checks passed: {verdict}.")
    elif verdict.lower().startswith(("not verified", "verification failed", "not registered",
                                     "passed ")):
        out.append(verdict[:1].upper() + verdict[1:])  # the verdict already says so
    else:
        out.append(f"NOT VERIFIED, failed: {verdict}")
    if rule.unbacked():
        out.append("A size fits no formula over the inputs (data-dependent): it is an "
                   "unbacked SymInt.")
    return out


def _function_name(op: str) -> str:
    name, overload = op.split("::", 1)[1].split(".", 1) if "." in op.split("::", 1)[1] \
        else (op.split("::", 1)[1], "default")
    return f"_fake_{name}" if overload == "default" else f"_fake_{name}_{overload}"


def _default_source(arg: ArgSpec) -> str:
    """A schema default as Python source. A fake receives only the arguments the caller
    passed (torch drops defaulted ones before dispatch), so it must carry the defaults."""
    value = arg.default
    if arg.scalar_type_default and isinstance(value, int):
        if value not in SCALAR_TYPE_DEFAULTS:
            raise ValueError(f"argument {arg.name}: ScalarType default {value} is not known here")
        return f"torch.{SCALAR_TYPE_DEFAULTS[value]}"
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, list):  # a tuple: a list default is mutable (ruff B006)
        return repr(tuple(value))
    return repr(value)


def _params(schema: OpSchema) -> list[str]:
    return schema.parameters(lambda arg: pyname(arg.name) + (
        f"={_default_source(arg)}" if arg.has_default else ""))


def base_tensor(schema: OpSchema) -> str:
    """The first plain Tensor argument: new outputs are made on its device."""
    for arg in schema.args:
        if arg.type == "Tensor":
            return pyname(arg.name)
    for arg in schema.args:  # a Tensor[] only: its first element
        if arg.type == "Tensor[]":
            return f"{pyname(arg.name)}[0]"
    raise ValueError(f"{schema.name}: no tensor argument to make outputs from")


def register_target(rule: OpRule) -> str:
    """The name register_fake takes: `ns::name` or `ns::name.overload`."""
    return rule.op.removesuffix(".default")


def function_source(rule: OpRule) -> str:
    """One register_fake function for one op rule; a plain function, its reason above it,
    where the rule must not be registered (rules.OpRule.unregistered)."""
    schema = rule.schema_spec()
    base = base_tensor(schema)
    lines = [f"# {rule.schema}"] if len(rule.schema) + 2 <= _LINE else \
        _comment(rule.schema, indent="")
    if rule.unregistered:
        lines += _comment("NOT REGISTERED: the reason is below.", indent="")
    else:
        lines.append(f'@torch.library.register_fake("{register_target(rule)}")')
    lines += _wrap_call(f"def {_function_name(rule.op)}(", _params(schema), "):")
    lines += [ln for sentence in evidence_sentences(rule) for ln in _comment(sentence)]
    taken = {pyname(a.name) for a in schema.args}

    def local(name: str) -> str:  # a local variable that shadows no argument
        while name in taken:
            name += "_"
        return name

    guard = rule.rank_guard
    if guard is not None:
        arg, ranks = pyname(guard.arg), guard.ranks
        test = f"{arg}.dim() == {ranks[0]}" if len(ranks) == 1 else f"{arg}.dim() in {ranks}"
        lines += [f"    torch._check({test}, lambda: f\"{guard.arg} of rank {{{arg}.dim()}}: "
                  f"this fake holds for rank {' or '.join(map(str, ranks))} only\")"]
    for name in rule.none_only:
        lines += [f"    torch._check({pyname(name)} is None, lambda: \"{name} given: this fake "
                  "saw no call with it,\"", '                 " where an output was None in '
                  'every call")']
    if not schema.returns:
        lines.append("    return None")
    elif len(rule.outputs) == 1:
        lines += _output_lines(rule.outputs[0], base, "return ", local("size"))
    else:
        outs = [local(f"out{i}") for i in range(len(rule.outputs))]
        for i, o in enumerate(rule.outputs):
            lines += _output_lines(o, base, f"{outs[i]} = ", local(f"size{i}"))
        lines.append("    return " + ", ".join(outs))
    return "\n".join(lines) + "\n"


def emit_python(rules: list[OpRule], header: str = "") -> str:
    """The whole module: a docstring (`header` adds a paragraph, e.g. the command that made
    it), `import torch`, the layout helper where a rule needs it, one function per op."""
    paragraph = textwrap.fill(header.strip(), 88, break_on_hyphens=False)
    text = HEADER.format(extra=f"\n\n{paragraph}" if paragraph else "")
    bodies = [function_source(r) for r in rules]
    if any("_empty_in_order_of(" in b for b in bodies):
        text += _LIKE_HELPER
    return text + "".join("\n\n" + b for b in bodies)
