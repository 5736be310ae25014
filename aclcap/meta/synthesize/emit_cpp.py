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
from collections import defaultdict
from pathlib import Path

import torch

from aclcap.meta.synthesize.emit_python import evidence_sentences, pyname, same_shape_as
from aclcap.meta.synthesize.rules import (
    BinOp,
    Const,
    Dim,
    DtypeRule,
    Expr,
    IntArg,
    LeadingDims,
    Numel,
    OpRule,
    OutputRule,
    Unbacked,
    WholeShape,
)

HEADER = """// Meta kernels synthesized by `aclcap check-meta --synthesize-cpp` from real calls of
// each op's kernel.{extra}
// Build into a library loaded after the op library (check-meta does this with
// torch.utils.cpp_extension), or add this file to the op library's sources.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/promote_types.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
"""

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
  TORCH_CHECK(static_cast<int64_t>(sizes.end() - sizes.begin()) == like.dim(),
              "synthesized layout: the output must have the rank of the input it follows");
  at::DimVector perm(like.dim());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    return like.sym_stride(a) > like.sym_stride(b);
  });
  c10::SymDimVector physical;
  for (const int64_t d : perm) physical.push_back(sizes[d]);
  at::DimVector inverse(perm.begin(), perm.end());
  for (int64_t i = 0; i < like.dim(); ++i) inverse[perm[i]] = i;
  return at::empty_symint(physical, options).permute(inverse);
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


def declared_types(schema: str) -> list[str]:
    """Each argument's type as the schema spells it (`SymInt[]`, `ScalarType`, `Tensor(a!)`):
    torch's parsed schema reports SymInt as int and ScalarType as int, which C++ can't."""
    inner = schema[schema.index("(") + 1: schema.rindex(") ->")]
    parts, depth, current = [], 0, ""
    for ch in inner:
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    types = []
    for part in (p.strip() for p in parts):
        if part and part != "*":
            types.append(part.split("=", 1)[0].rsplit(" ", 1)[0].strip())
    return types


def _param_type(declared: str) -> str:
    base = re.sub(r"\([a-z]+!?\)", "", declared)  # Tensor(a!) -> Tensor
    base = re.sub(r"\[\d+\]", "[]", base)  # int[2] -> int[]
    if base == "Tensor" and "!" in declared:
        return "at::Tensor&"
    if base not in _PARAM_TYPES:
        raise ValueError(f"no C++ parameter type for schema type {declared!r}")
    return _PARAM_TYPES[base]


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
    if not isinstance(e, BinOp):
        raise TypeError(f"not a C++ shape expression: {e!r}")
    if e.op == "ceil//":  # sizes are >= 0 and divisors > 0: (a + b - 1) / b rounds up
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


def _is_data_dependent(rule: OpRule) -> bool:
    return any(isinstance(e, Unbacked) for o in rule.outputs if isinstance(o.shape, tuple)
               for e in o.shape)


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
        elif out.shape and isinstance(out.shape[0], LeadingDims):
            lead = out.shape[0]
            tail = "{" + ", ".join(expr_source(e) for e in out.shape[1:]) + "}"  # type: ignore[arg-type]
            sizes = f"leading_dims({pyname(lead.arg)}, {lead.drop}, {tail})"
            if hoist:
                setup.append(f"  const c10::SymDimVector {name}_sizes = {sizes};")
                sizes = f"{name}_sizes"
        else:
            listed = "{" + ", ".join(expr_source(e) for e in out.shape) + "}"
            sizes = "c10::SymDimVector" + listed
            if hoist:
                setup.append(f"  c10::SymDimVector {name}_sizes{listed};")
                sizes = f"{name}_sizes"
        if out.alias.kind == "view":
            text = f"view_of_contiguous({pyname(out.alias.arg or '')}, {sizes})"
        else:
            like = out.layout.arg if out.layout.kind == "like" else None
            same_dtype = out.dtype is not None and out.dtype.kind == "like" and \
                out.dtype.arg == like
            options = f"{base}.options().dtype({_dtype_source(out.dtype, base)})"
            if hoist:
                setup.append(f"  const auto {name}_options = {options};")
                options = f"{name}_options"
            if like is not None and same_shape_as(out, like):  # empty_like keeps its strides
                text = f"at::empty_like({pyname(like)})" if same_dtype else \
                    f"at::empty_like({pyname(like)}, {options})"
            elif like is not None:  # another shape of the same rank, in like's stride order
                text = f"empty_in_order_of({pyname(like)}, {sizes}, {options})"
            else:
                text = f"at::empty_symint({sizes}, {options})"
    return setup, text


def _output_lines(out: OutputRule, base: str, types: dict[str, str], ret_type: str,
                  target: str, name: str) -> list[str]:
    """The statements that make one output: `return ...;` (target "return") or the
    declaration of variable `target`; a None output by its none_when condition. `name`
    prefixes the variables that hold its sizes and options."""
    if out.shape is None:
        return ["  return std::nullopt;" if target == "return" else
                f"  {ret_type} {target} = std::nullopt;"]
    for hoist in (False, True):
        setup, text = _output(out, base, types, name, hoist)
        assign = f"  return {text};" if target == "return" else f"  {target} = {text};"
        if len(assign) <= 100:
            break
    if out.none_when is None:
        if target != "return":
            assign = f"  {ret_type.rstrip('&')} {target} = {text};"
        return [*setup, assign]
    arg, condition = out.none_when
    cond = _condition(arg, condition, types.get(arg, ""))
    if target == "return":
        return [f"  if ({cond}) {{", "    return std::nullopt;", "  }", *setup, assign]
    return [f"  {ret_type} {target};  // None when {arg} {condition}",
            f"  if (!({cond})) {{", *("  " + s for s in setup), "  " + assign, "  }"]


def _return_types(schema: torch._C.FunctionSchema, rule: OpRule, types: dict[str, str]
                  ) -> list[str]:
    out = []
    for ret, o in zip(schema.returns, rule.outputs, strict=True):
        optional = str(ret.type).startswith("Optional")
        mutable_input = (o.alias.kind == "input" and "!" in types.get(o.alias.arg or "", "")
                         and len(schema.returns) == 1)
        out.append("std::optional<at::Tensor>" if optional else
                   "at::Tensor&" if mutable_input else "at::Tensor")
    return out


def _comment(text: str, indent: str = "") -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(indent) + 3 + len(line) + 1 + len(word) > 100:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [f"{indent}// {ln}" for ln in [*lines, line] if ln]


def kernel_name(op: str) -> str:
    name = op.split("::", 1)[1]
    base, _, overload = name.partition(".")
    return f"{base}_meta" if overload in ("", "default") else f"{base}_{overload}_meta"


def function_source(rule: OpRule) -> str:
    """One Meta kernel for one op rule."""
    schema = torch._C.parse_schema(rule.schema)
    declared = declared_types(rule.schema)
    types = {a.name: t for a, t in zip(schema.arguments, declared, strict=True)}
    base = next((pyname(a.name) for a in schema.arguments if str(a.type) == "Tensor"), None)
    base = base or next((f"{pyname(a.name)}[0]" for a in schema.arguments
                         if str(a.type) == "List[Tensor]"), None)
    if base is None:
        raise ValueError(f"{rule.op}: no tensor argument to make outputs from")
    params = [f"{_param_type(t)} {pyname(a.name)}" for a, t in zip(schema.arguments, declared,
                                                                       strict=True)]
    rets = _return_types(schema, rule, types)
    ret = "void" if not rets else rets[0] if len(rets) == 1 else \
        f"std::tuple<{', '.join(rets)}>"
    lines = _comment(rule.schema) + [
        ln for sentence in evidence_sentences(rule) for ln in _comment(sentence)]
    head = f"{ret} {kernel_name(rule.op)}("
    one = head + ", ".join(params) + ") {"
    lines += [one] if len(one) <= 100 else [head + params[0] + ","] + [
        " " * len(head) + p + ("," if i < len(params) - 2 else ") {")
        for i, p in enumerate(params[1:])]
    if not rets:
        lines.append("  // an out-variant: it only writes its arguments")
    # Locals are result, result_sizes, result0...: made longer until they shadow no argument.
    taken = {pyname(a.name) for a in schema.arguments}
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


def emit_cpp(rules: list[OpRule], ns: str | None = None, header: str = "") -> str:
    """The whole C++ file: one Meta kernel per rule and one `TORCH_LIBRARY_IMPL(ns, Meta, m)`
    block per namespace (only `ns` where given). Rules with a data-dependent size (see the
    module docstring) or a schema type C++ has no form for here get a comment instead."""
    by_ns: dict[str, list[OpRule]] = defaultdict(list)
    for rule in rules:
        by_ns[rule.op.split("::", 1)[0]].append(rule)
    if ns is not None:
        by_ns = {ns: by_ns.get(ns, [])}
    text = HEADER.format(extra=f"\n// {header.strip()}" if header.strip() else "")
    for name, group in by_ns.items():
        kernels, bodies, skipped = [], [], []
        for rule in group:
            if _is_data_dependent(rule):
                skipped.append(_comment(
                    f"{rule.op}: an output size is data-dependent (no formula over the inputs "
                    "fits). A C++ Meta kernel cannot make an unbacked SymInt, so this op has "
                    "none here: load the Python fake that `aclcap check-meta --synthesize` "
                    "writes for it (ctx.new_dynamic_size())."))
                continue
            try:
                bodies.append(function_source(rule))
            except ValueError as exc:  # a schema type with no C++ form here: say so, go on
                skipped.append(_comment(f"{rule.op}: no C++ Meta kernel emitted: {exc}; load "
                                        "the Python fake that `--synthesize` writes for it."))
                continue
            kernels.append(rule)
        text += "\nnamespace {\n"
        if any(isinstance(o.shape, tuple) and o.shape and isinstance(o.shape[0], LeadingDims)
               for r in kernels for o in r.outputs):
            text += _LEADING_HELPER
        if any("view_of_contiguous(" in body for body in bodies):
            text += _VIEW_HELPER
        if any("empty_in_order_of(" in body for body in bodies):
            text += _ORDER_HELPER
        text += "".join("\n" + body for body in bodies)
        text += "\n}  // namespace\n"
        text += "".join("\n" + "\n".join(lines) + "\n" for lines in skipped)
        text += f"\nTORCH_LIBRARY_IMPL({name}, Meta, m) {{\n"
        for r in kernels:
            overload = r.op.split("::", 1)[1].removesuffix(".default")
            text += f'  m.impl("{overload}", TORCH_FN({kernel_name(r.op)}));\n'
        text += "}\n"
    return text


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
