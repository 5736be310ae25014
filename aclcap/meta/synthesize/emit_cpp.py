"""OpRules -> C++ Meta kernels in a `TORCH_LIBRARY_IMPL(ns, Meta, m)` block, the form C++ op
libraries (vllm-ascend's meta file) keep them in, and the build of that file into a library
loaded after the op library.

Sizes stay symbolic: `sym_size`, `sym_numel`, `c10::SymInt` arithmetic (ceil division written
out as `(a + b - 1) / b`), `at::empty_symint` over a `c10::SymDimVector`, so `check-meta
--lint` finds nothing. A data-dependent size is the one thing left out: a C++ Meta kernel
cannot make an unbacked SymInt (the ShapeEnv that owns them is Python's, reached through
`torch.library.get_ctx()` in a register_fake), so such an op gets no kernel here, and the
file says in a comment that the Python fake from `--synthesize` serves it.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

import torch

from aclcap.meta.synthesize.emit_python import (
    base_tensor,
    comment_lines,
    evidence_sentences,
    pyname,
    same_shape_as,
)
from aclcap.meta.synthesize.rules import (
    AlongDim,
    BinOp,
    Const,
    Dim,
    DtypeRule,
    Expr,
    IntArg,
    ItemSize,
    LeadingDims,
    ListLen,
    Numel,
    OpRule,
    OutputRule,
    TrailingDims,
    Unbacked,
    WholeShape,
)
from aclcap.meta.synthesize.schema import ArgSpec, OpSchema
from aclcap.meta.synthesize.signatures import CppSignature, split_top

HEADER = """// Meta kernels synthesized by `aclcap check-meta --synthesize-cpp` from real calls of
// each op's kernel.{extra}
// Build into a library loaded after the op library (check-meta does this with
// torch.utils.cpp_extension), or add this file to the op library's sources.
"""
# What a use in the body needs included, in the order the header lists them.
_INCLUDES = (("", "<ATen/core/Tensor.h>"), ("at::empty_symint(", "<ATen/ops/empty.h>"),
             ("at::empty_strided_symint(", "<ATen/ops/empty_strided.h>"),
             ("at::empty_like(", "<ATen/ops/empty_like.h>"),
             ("at::promote_types(", "<ATen/ops/promote_types.h>"), ("", "<torch/library.h>"),
             ("std::stable_sort(", "<algorithm>"), ("std::iota(", "<numeric>"),
             ("std::optional", "<optional>"), ("std::tuple", "<tuple>"))

# Schema argument types -> the C++ parameter types the dispatcher's unboxing expects.
_PARAM_TYPES = {
    "Tensor": "const at::Tensor&",
    "Tensor?": "const std::optional<at::Tensor>&",
    "Tensor[]": "at::TensorList",
    "Tensor?[]": "const c10::List<std::optional<at::Tensor>>&",
    "int": "int64_t",
    "int?": "std::optional<int64_t>",
    "SymInt": "c10::SymInt",
    "SymInt?": "std::optional<c10::SymInt>",
    "int[]": "at::IntArrayRef",
    "int[]?": "at::OptionalIntArrayRef",
    "SymInt[]": "c10::SymIntArrayRef",
    "float": "double",
    "float?": "std::optional<double>",
    "bool": "bool",
    "bool?": "std::optional<bool>",
    "ScalarType": "at::ScalarType",
    "ScalarType?": "std::optional<at::ScalarType>",
    "str": "c10::string_view",
    "Scalar": "const at::Scalar&",
    "Scalar?": "const std::optional<at::Scalar>&",
    "Layout?": "std::optional<at::Layout>",
    "Device?": "std::optional<at::Device>",
}
# torch dtype names whose c10::ScalarType name is not the name capitalized.
_SCALAR_TYPES = {
    "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
    "float16": "Half", "float32": "Float", "float64": "Double", "bool": "Bool",
    "bfloat16": "BFloat16", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
    "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2}
# aten::view's Meta kernel takes concrete sizes only ("SymIntArrayRef expected to contain
# only concrete integers" under dynamic shapes); as_strided's takes SymInts. So a view is
# written as the strides view() would give a contiguous input.
_VIEW_HELPER = """
// A view of contiguous `self` with `sizes`, as self.view(sizes) gives, kept symbolic.
at::Tensor view_of_contiguous(const at::Tensor& self, c10::SymIntArrayRef sizes) {
  TORCH_CHECK(self.is_contiguous(), "synthesized view: the input must be contiguous");
  c10::SymDimVector strides(sizes.begin(), sizes.end());
  c10::SymInt step = 1;
  for (auto it = strides.rbegin(); it != strides.rend(); ++it) {
    c10::SymInt dim = *it;
    *it = step;
    step = step * dim;
  }
  return self.as_strided_symint(sizes, strides, self.sym_storage_offset());
}
"""
# empty_like keeps a layout only for the same shape; for another shape of the same rank the
# output is laid out in the input's stride order, as the Python fake's helper does it.
_ORDER_HELPER = """
// An empty tensor of `sizes` laid out in the stride order of `like` (same rank): dims from
// the largest stride to the smallest, as empty_like orders them. Comparing symbolic strides
// guards on them, as torch's own layout rules do.
at::Tensor empty_in_order_of(const at::Tensor& like, c10::SymIntArrayRef sizes,
                             at::TensorOptions options) {
  TORCH_CHECK(static_cast<int64_t>(sizes.size()) == like.dim(),
              "synthesized layout: the output must have the rank of the input it follows");
  at::DimVector order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return like.sym_stride(a) > like.sym_stride(b);
  });
  return empty_in_order(sizes, order, options);
}
"""
# A dense tensor whose dims run in a given order: strides written out, since a permute()
# inside a Meta kernel trips torch's fake-tensor dispatch under symbolic sizes.
_DENSE_HELPER = """
// An empty dense tensor of `sizes` whose dims run outermost to innermost in `order`.
at::Tensor empty_in_order(c10::SymIntArrayRef sizes, at::IntArrayRef order,
                          at::TensorOptions options) {
  c10::SymDimVector strides(sizes.size());
  c10::SymInt step = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = step;
    step = step * sizes[*it];
  }
  return at::empty_strided_symint(sizes, strides, options);
}
"""
# A shape that keeps an input's leading dims whatever its rank (rules.LeadingDims).
_LEADING_HELPER = """
// t's sizes without the last `drop`, then `tail`: [*t.shape[:-drop], *tail], symbolic.
c10::SymDimVector leading_dims(const at::Tensor& t, int64_t drop,
                               std::initializer_list<c10::SymInt> tail) {
  const auto all = t.sym_sizes();
  c10::SymDimVector out(all.begin(), all.end() - drop);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}
"""
# A shape along a dim an int argument picks (rules.AlongDim), negative from the end.
_ALONG_HELPER = """
// t's sizes with dim `dim` (negative: from the end) replaced by `middle` (none: removed).
c10::SymDimVector along_dim(const at::Tensor& t, int64_t dim,
                            std::initializer_list<c10::SymInt> middle) {
  const auto all = t.sym_sizes();
  const int64_t d = dim < 0 ? dim + t.dim() : dim;
  c10::SymDimVector out(all.begin(), all.begin() + d);
  out.insert(out.end(), middle.begin(), middle.end());
  out.insert(out.end(), all.begin() + d + 1, all.end());
  return out;
}
"""
# An index tensor's dims before another tensor's trailing ones (rules.TrailingDims).
_TRAILING_HELPER = """
// `head`, then t's sizes from dim `skip` on: [*head, *t.shape[skip:]], symbolic.
c10::SymDimVector with_trailing(c10::SymDimVector head, const at::Tensor& t, int64_t skip) {
  const auto all = t.sym_sizes();
  head.insert(head.end(), all.begin() + skip, all.end());
  return head;
}
"""


def _along_sizes(shape: AlongDim) -> str:
    """along_dim(...) of an AlongDim: its middle, or 1 where `keepdim` keeps the dim."""
    x, dim = pyname(shape.arg), shape.dim_source(pyname)
    if shape.keepdim is not None:
        return (f"{pyname(shape.keepdim)} ? along_dim({x}, {dim}, {{1}}) : "
                f"along_dim({x}, {dim}, {{}})")
    middle = ", ".join(expr_source(e) for e in shape.middle)
    return f"along_dim({x}, {dim}, {{{middle}}})"


def _helper_sizes(shape: object) -> str | None:
    """The helper call that builds a shape the emitted helpers cover: along_dim, an index's
    dims with_trailing another's, leading_dims; None for a plain list of dims."""
    if isinstance(shape, AlongDim):
        return _along_sizes(shape)
    if not isinstance(shape, tuple) or not shape or not isinstance(shape[0], LeadingDims):
        return None
    lead = shape[0]
    last = shape[-1] if isinstance(shape[-1], TrailingDims) else None
    rest = shape[1:-1] if last is not None else shape[1:]
    listed = "{" + ", ".join(expr_source(e) for e in rest) + "}"  # type: ignore[arg-type]
    sizes = f"leading_dims({pyname(lead.arg)}, {lead.drop}, {listed})"
    return sizes if last is None else f"with_trailing({sizes}, {pyname(last.arg)}, {last.skip})"


def _guard_line(rule: OpRule) -> list[str]:
    """TORCH_CHECK of the ranks a rank-guarded rule holds for (rules.RankGuard)."""
    guard = rule.rank_guard
    if guard is None:
        return []
    arg = pyname(guard.arg)
    test = " || ".join(f"{arg}.dim() == {r}" for r in guard.ranks)
    ranks = " or ".join(map(str, guard.ranks))
    return [f'  TORCH_CHECK({test}, "{guard.arg} of rank ", {arg}.dim(),',
            f'              ": this Meta kernel holds for rank {ranks} only");']


def _none_only_lines(rule: OpRule) -> list[str]:
    """TORCH_CHECK that each optional tensor no call gave is absent (OpRule.none_only)."""
    return [f'  TORCH_CHECK(!{pyname(n)}.has_value(), "{n} given: this Meta kernel saw no '
            'call with it, where an output was None in every call");' for n in rule.none_only]


def _param_type(arg: ArgSpec) -> str:
    """The C++ type the dispatcher's unboxing takes for `arg`, where the library's own
    signature is unknown (an op without a typed kernel)."""
    base = re.sub(r"\[\d+\]", "[]", arg.type)  # int[2] -> int[]
    if base == "Tensor" and arg.write:
        return "at::Tensor&"
    if base not in _PARAM_TYPES:
        raise ValueError(f"no C++ parameter type for schema type {arg.declared()!r}")
    return _PARAM_TYPES[base]


# Spellings the dispatcher prints (c10::demangle) -> the ones people write: the same types.
_PRETTY = ((re.compile(r"std::__cxx11::basic_string<char, std::char_traits<char>, "
                       r"std::allocator<char> >"), "std::string"),
           (re.compile(r"std::vector<(\w[\w:]*), std::allocator<\1 > >"), r"std::vector<\1>"),
           (re.compile(r"c10::ArrayRef<long>"), "at::IntArrayRef"),
           (re.compile(r"c10::ArrayRef<c10::SymInt>"), "c10::SymIntArrayRef"),
           (re.compile(r"c10::ArrayRef<at::Tensor>"), "at::TensorList"),
           (re.compile(r"\blong\b"), "int64_t"),
           (re.compile(r"^(.*\S) const&$"), r"const \1&"))


def pretty_type(text: str) -> str:
    """`at::Tensor const&` -> `const at::Tensor&`, `long` -> `int64_t`: the same C++ type
    (the dispatcher compares types, not spellings), as a person writes it."""
    for pattern, replacement in _PRETTY:
        text = pattern.sub(replacement, text)
    return text


def scalar_type(dtype: str) -> str:
    """`uint8` -> `at::kByte`, `float8_e4m3fn` -> `at::kFloat8_e4m3fn`."""
    if not hasattr(torch, dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return "at::k" + _SCALAR_TYPES.get(dtype, dtype[:1].upper() + dtype[1:])


def expr_source(e: Expr | Unbacked, prec: int = 0) -> str:
    """C++ source of an integer expression over SymInts (parenthesized where needed)."""
    if isinstance(e, Const):
        return str(e.value) if e.value >= 0 or prec == 0 else f"({e.value})"
    if isinstance(e, Dim | Numel):
        base = pyname(e.arg) if e.item is None else f"{pyname(e.arg)}[{e.item}]"
        return f"{base}.sym_size({e.index})" if isinstance(e, Dim) else f"{base}.sym_numel()"
    if isinstance(e, IntArg):
        return pyname(e.arg) if e.index is None else f"{pyname(e.arg)}[{e.index}]"
    if isinstance(e, ListLen):
        return f"static_cast<int64_t>({pyname(e.arg)}.size())"
    if isinstance(e, ItemSize):
        return f"{pyname(e.arg)}.element_size()" if e.tensor else \
            f"static_cast<int64_t>(c10::elementSize({pyname(e.arg)}))"
    if not isinstance(e, BinOp):
        raise TypeError(f"not a C++ shape expression: {e!r}")
    if e.op in ("max", "min"):
        return f"c10::SymInt({expr_source(e.left)}).{e.op}({expr_source(e.right)})"
    if e.op == "ceil//":  # sizes are >= 0 and divisors > 0: (a + b - 1) / b rounds up
        if isinstance(e.right, Const):  # (k + 1) / 2, not (k + 2 - 1) / 2
            text = f"({expr_source(e.left, 1)} + {e.right.value - 1}) / {e.right.value}" \
                if e.right.value > 1 else expr_source(e.left, 2)
        else:
            right = expr_source(e.right, 1)
            text = f"({expr_source(e.left, 1)} + {right} - 1) / {expr_source(e.right, 3)}"
        return f"({text})" if prec >= 2 else text  # an operand of * or / keeps it whole
    own = _PRECEDENCE[e.op]
    op = "/" if e.op == "//" else e.op  # SymInt's / floors (sizes are never negative)
    text = f"{expr_source(e.left, own)} {op} {expr_source(e.right, own + 1)}"
    return f"({text})" if own < prec else text


def _dtype_source(rule: DtypeRule | None, base: str) -> str:
    if rule is None or (rule.kind == "like" and rule.arg is None):
        return f"{base}.scalar_type()"
    if rule.kind == "fixed":
        return scalar_type(rule.dtype or "")
    if rule.kind == "like":
        return f"{pyname(rule.arg or '')}.scalar_type()"
    if rule.kind == "arg":
        return pyname(rule.arg or "")
    text = f"{pyname(rule.args[0])}.scalar_type()"
    for a in rule.args[1:]:
        text = f"at::promote_types({text}, {pyname(a)}.scalar_type())"
    return text


def _condition(arg: str, condition: str, declared: str) -> str:
    """A none_when condition (rules.NONE_CONDITIONS: `is None`, `> 0`, `is True`) in C++."""
    name = pyname(arg)
    if condition.strip() == "is None":
        return f"!{name}.has_value()"
    if condition.strip() == "is not None":
        return f"{name}.has_value()"
    value = name + ".value()" if declared.endswith("?") else name
    if condition.strip() in ("is True", "is False"):
        return value if condition.strip() == "is True" else f"!{value}"
    return f"{value} {condition.strip()}"


def _output(out: OutputRule, base: str, types: dict[str, str], name: str,
            hoist: bool) -> tuple[list[str], str]:
    """Statements that prepare one output (with `hoist`, its sizes and options as variables
    named after `name`, for short lines) and the expression that makes it."""
    setup: list[str] = []
    if out.alias.kind == "input":
        text = pyname(out.alias.arg or "")
    else:
        if isinstance(out.shape, WholeShape):
            arg = pyname(out.shape.arg)
            sizes = arg if types.get(out.shape.arg, "").startswith("SymInt") else \
                f"c10::fromIntArrayRefSlow({arg})"
        elif isinstance(out.shape, tuple) and len(out.shape) == 1 and \
                isinstance(out.shape[0], LeadingDims) and out.shape[0].drop == 0:
            sizes = f"{pyname(out.shape[0].arg)}.sym_sizes()"
        elif (called := _helper_sizes(out.shape)) is not None:
            sizes = called
            if hoist:
                setup.append(f"  const c10::SymDimVector {name}_sizes = {sizes};")
                sizes = f"{name}_sizes"
        else:
            listed = "{" + ", ".join(expr_source(e) for e in out.shape) + "}"
            sizes = "c10::SymDimVector" + listed
            if hoist:
                line = f"  c10::SymDimVector {name}_sizes{listed};"
                setup += [line] if len(line) <= 100 else [
                    f"  c10::SymDimVector {name}_sizes{{",
                    *(f"      {expr_source(e)}," for e in out.shape[:-1]),
                    f"      {expr_source(out.shape[-1])}}};"]
                sizes = f"{name}_sizes"
        if out.alias.kind == "view":
            text = f"view_of_contiguous({pyname(out.alias.arg or '')}, {sizes})"
        else:
            like = out.layout.arg if out.layout.kind == "like" else None
            same_dtype = out.dtype is not None and out.dtype.kind == "like" and \
                out.dtype.arg == like
            dtype = _dtype_source(out.dtype, base)
            options = f"{base}.options()" if dtype == f"{base}.scalar_type()" else \
                f"{base}.options().dtype({dtype})"
            if hoist:
                setup.append(f"  const auto {name}_options = {options};")
                options = f"{name}_options"
            if like is not None and same_shape_as(out, like):  # empty_like keeps its strides
                text = f"at::empty_like({pyname(like)})" if same_dtype else \
                    f"at::empty_like({pyname(like)}, {options})"
            elif like is not None:  # another shape of the same rank, in like's stride order
                text = f"empty_in_order_of({pyname(like)}, {sizes}, {options})"
            elif out.layout.kind == "order":
                order = ", ".join(map(str, out.layout.order))
                text = f"empty_in_order({sizes}, {{{order}}}, {options})"
            else:
                text = f"at::empty_symint({sizes}, {options})"
            if like is not None and out.layout.ranks:  # like's order at those ranks only
                test = " || ".join(f"{pyname(like)}.dim() == {r}" for r in out.layout.ranks)
                text = f"({test}) ? {text} : at::empty_symint({sizes}, {options})"
    return setup, text


def _output_lines(out: OutputRule, base: str, types: dict[str, str], ret_type: str,
                  target: str, name: str) -> list[str]:
    """The statements that make one output: `return ...;` (target "return") or the
    declaration of variable `target`; a None output by its none_when condition. `name`
    prefixes the variables that hold its sizes and options."""
    if out.shape is None:
        return ["  return std::nullopt;" if target == "return" else
                f"  {ret_type} {target} = std::nullopt;"]
    declared = out.none_when is None and target != "return"
    for hoist in (False, True):
        setup, text = _output(out, base, types, name, hoist)
        assign = f"  return {text};" if target == "return" else \
            f"  {ret_type.rstrip('&')} {target} = {text};" if declared else \
            f"  {target} = {text};"
        if len(assign) <= 100:
            break
    if out.none_when is None:
        return [*setup, assign]
    arg, condition = out.none_when
    cond = _condition(arg, condition, types.get(arg, ""))
    if target == "return":
        return [f"  if ({cond}) {{", "    return std::nullopt;", "  }", *setup, assign]
    return [f"  {ret_type} {target};  // None when {arg} {condition}",
            f"  if (!({cond})) {{", *("  " + s for s in setup), "  " + assign, "  }"]


def _return_types(schema: OpSchema, rule: OpRule, sig: CppSignature | None) -> list[str]:
    """Each output's C++ type: the library's own where its signature is known."""
    if sig is not None:
        ret = pretty_type(sig.ret)
        if ret == "void":
            return []
        if len(schema.returns) > 1 and ret.startswith("std::tuple<"):
            return split_top(ret[len("std::tuple<"):-1])
        return [ret]
    out = []
    for ret, o in zip(schema.returns, rule.outputs, strict=True):
        mutable_input = (o.alias.kind == "input" and o.alias.arg is not None
                         and schema.arg(o.alias.arg).write and len(schema.returns) == 1)
        out.append("std::optional<at::Tensor>" if ret.type.endswith("?") else
                   "at::Tensor&" if mutable_input else "at::Tensor")
    return out


def _comment(text: str, indent: str = "") -> list[str]:
    return comment_lines(text, indent, "//")


def kernel_name(op: str) -> str:
    name = op.split("::", 1)[1]
    base, _, overload = name.partition(".")
    return f"{base}_meta" if overload in ("", "default") else f"{base}_{overload}_meta"


def function_source(rule: OpRule, sig: CppSignature | None = None, name: str = "") -> str:
    """One Meta kernel for one op rule, in the library's own C++ signature `sig` where it
    is known (the dispatcher aborts on a Meta kernel of another signature); `name` where
    kernel_name's would clash with another namespace's op of the same name."""
    schema = rule.schema_spec()
    types = {a.name: a.type for a in schema.args}
    base = base_tensor(schema)
    if sig is not None and len(sig.params) == len(schema.args):
        param_types = [pretty_type(p) for p in sig.params]
    else:
        sig = None
        param_types = [_param_type(a) for a in schema.args]
    params = [f"{t} {pyname(a.name)}" for a, t in zip(schema.args, param_types, strict=True)]
    rets = _return_types(schema, rule, sig)
    ret = "void" if not rets else rets[0] if len(rets) == 1 else \
        f"std::tuple<{', '.join(rets)}>"
    lines = _comment(rule.schema) + [
        ln for sentence in evidence_sentences(rule) for ln in _comment(sentence)]
    head = f"{ret} {name or kernel_name(rule.op)}("
    one = head + ", ".join(params) + ") {"
    lines += [one] if len(one) <= 100 else [head + params[0] + ","] + [
        " " * len(head) + p + ("," if i < len(params) - 2 else ") {")
        for i, p in enumerate(params[1:])]
    lines += _guard_line(rule) + _none_only_lines(rule)
    if not rets:
        lines.append("  // an out-variant: it only writes its arguments")
    # Locals are result, result_sizes, result0...: made longer until they shadow no argument.
    taken = {pyname(a.name) for a in schema.args}
    stem = "result"
    while any(t.startswith(stem) for t in taken):
        stem += "_"
    for i, (o, r) in enumerate(zip(rule.outputs, rets, strict=True)):
        var = f"{stem}{i}"
        lines += _output_lines(o, base, types, r, "return" if len(rets) == 1 else var,
                               stem if len(rets) == 1 else var)
    if len(rets) > 1:
        lines.append("  return {" + ", ".join(f"{stem}{i}" for i in range(len(rets))) + "};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def emit_cpp(rules: list[OpRule], ns: str | None = None, header: str = "",
             signatures: dict[str, CppSignature] | None = None, not_built: str = "") -> str:
    """The whole C++ file: one Meta kernel per rule, in the library's C++ signature where
    `signatures` has it, and one `TORCH_LIBRARY_IMPL(ns, Meta, m)` block per namespace (only
    `ns` where given); a rule that must not be registered (OpRule.unregistered) keeps its
    kernel and has its `m.impl` line commented out, with the reason. Rules with a
    data-dependent size (see the module docstring) or a schema type C++ has no form for
    here get a comment instead. Only the headers the kernels use are included, and each
    helper once, whatever the namespaces (one translation unit: a second definition does
    not build). `not_built`: why this file did not build, said at its top."""
    signatures = signatures or {}
    by_ns: dict[str, list[OpRule]] = defaultdict(list)
    for rule in rules:
        by_ns[rule.op.split("::", 1)[0]].append(rule)
    if ns is not None:
        by_ns = {ns: by_ns.get(ns, [])}
    taken = Counter(kernel_name(r.op) for group in by_ns.values() for r in group)

    def name_of(op: str) -> str:  # two namespaces' ops of one name: two kernels
        name = kernel_name(op)
        return f"{op.split('::', 1)[0]}_{name}" if taken[name] > 1 else name

    blocks: list[tuple[str, list[OpRule], list[str], list[list[str]]]] = []
    for space, group in by_ns.items():
        kernels, bodies, skipped = [], [], []
        for rule in group:
            if rule.python_only():
                skipped.append(_comment(
                    f"{rule.op}: {rule.python_only()}, so this op has none here: load the "
                    "Python fake that `aclcap check-meta --synthesize` writes for it."))
                continue
            try:
                bodies.append(function_source(rule, signatures.get(rule.op), name_of(rule.op)))
            except ValueError as exc:  # a schema type with no C++ form here: say so, go on
                skipped.append(_comment(f"{rule.op}: no C++ Meta kernel emitted: {exc}; load "
                                        "the Python fake that `--synthesize` writes for it."))
                continue
            kernels.append(rule)
        blocks.append((space, kernels, bodies, skipped))
    every = [b for _, _, bodies, _ in blocks for b in bodies]
    helpers = "".join(helper for use, helper in (
        ("leading_dims(", _LEADING_HELPER), ("view_of_contiguous(", _VIEW_HELPER),
        ("empty_in_order", _DENSE_HELPER), ("empty_in_order_of(", _ORDER_HELPER),
        ("along_dim(", _ALONG_HELPER), ("with_trailing(", _TRAILING_HELPER))
        if any(use in b for b in every))
    body = ""
    for i, (space, kernels, bodies, skipped) in enumerate(blocks):
        body += "\nnamespace {\n" + (helpers if i == 0 else "")
        body += "".join("\n" + b for b in bodies)
        body += "\n}  // namespace\n"
        body += "".join("\n" + "\n".join(lines) + "\n" for lines in skipped)
        body += f"\nTORCH_LIBRARY_IMPL({space}, Meta, m) {{\n"
        for r in kernels:
            overload = r.op.split("::", 1)[1].removesuffix(".default")
            line = f'm.impl("{overload}", TORCH_FN({name_of(r.op)}));'
            if r.unregistered:
                body += f"  // not registered (the reason is above {name_of(r.op)}):\n"
                line = f"// {line}"
            body += f"  {line}\n"
        body += "}\n"
    includes = [f"#include {header_file}" for use, header_file in _INCLUDES
                if not use or use in body]
    system = [i for i in includes if not i.endswith(".h>")]
    own = [i for i in includes if i.endswith(".h>")]
    built = "".join(line + "\n" for line in _comment(
        f"NOT BUILT: {not_built}. No kernel below was verified in C++.")) if not_built else ""
    lines = textwrap.wrap(header.strip(), 88, break_on_hyphens=False)
    return (HEADER.format(extra="".join(f"\n// {line}" for line in lines)) + built
            + "\n".join(own) + "\n" + ("\n" + "\n".join(system) + "\n" if system else "")
            + body)


def library_name(source: Path) -> str:
    """A library name unique to the file's path, so two emitted files never share a build."""
    digest = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:8]
    return f"aclcap_meta_{re.sub(r'[^0-9A-Za-z_]', '_', source.stem)}_{digest}"


def build_meta_library(source: Path, build_dir: Path, verbose: bool = False) -> Path:
    """Compile an emitted C++ file into a shared library with the project's build path
    (torch.utils.cpp_extension, ninja; a compile error raises BuildError with the compiler's
    first error lines). Load it with torch.ops.load_library after the op library."""
    from aclcap.build import compile_library

    # Meta kernels compute no data: the vector flags of the op library buy nothing here.
    return compile_library(library_name(source), [Path(source)], Path(build_dir),
                           flags=["-O1"], verbose=verbose)
