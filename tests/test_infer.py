"""infer: rules from real calls. The calls come from observe() on real kernels: the bundled
ops, and small ops defined here whose true fakes are the hard cases of real libraries
(packed 4-bit, blockwise scales, int[] shapes, row statistics, aliases, optional outputs,
data-dependent sizes, lying schemas). Nothing here reads a fake impl."""

from __future__ import annotations

import math

import pytest
import torch

from aclcap.meta.observe import observe
from aclcap.meta.registry import resolve_overload
from aclcap.meta.sample_inputs import SampleInput, samples_for
from aclcap.meta.synthesize.describe import describe_rule
from aclcap.meta.synthesize.emit_python import emit_python
from aclcap.meta.synthesize.expr_search import evaluate, search, terms
from aclcap.meta.synthesize.infer import SynthesisError, held_out, infer
from aclcap.meta.synthesize.rules import (
    AliasRule,
    AlongDim,
    BinOp,
    Const,
    Dim,
    DtypeRule,
    IntArg,
    LayoutRule,
    LeadingDims,
    Numel,
    Unbacked,
    WholeShape,
)
from aclcap.meta.synthesize.schema import OpSchema
from aclcap.meta.variations import variations

NS = "aclcap_infertest"
_lib = torch.library.Library(NS, "DEF")


def _define(schema: str, kernel) -> torch._ops.OpOverload:
    _lib.define(schema)
    name = schema.split("(", 1)[0]
    _lib.impl(name, kernel, "CPU")
    return resolve_overload(f"{NS}::{name if '.' in name else name + '.default'}")


def _pack4(x):
    flat = x.reshape(-1)
    return torch.zeros((flat.numel() + 1) // 2, 1, dtype=torch.uint8)


def _block_scales(x, blocksize):
    return x.reshape(-1).new_ones(math.ceil(x.numel() / blocksize), dtype=torch.float32)


def _full_like_shape(x, size, dtype):
    return torch.zeros(size, dtype=dtype)


def _row_stats(x):
    return x.reshape(-1, x.shape[-1]).float().mean(-1)


def _scale_(x, alpha):
    x.mul_(alpha)
    return x


def _first_rows(x, n):
    if not 0 <= n <= x.shape[0]:
        raise ValueError(f"first_rows: n={n} out of range")
    return x[:n]


def _quant(x, scale):
    q = (x * 4).round().to(torch.int8)
    return q, (None if scale == 0 else x.abs().amax(-1, keepdim=True).float())


def _permute(x, weights=None):
    """fbgemm's permute_1D_sparse_data in small: the weights permuted with the values, and
    None without them."""
    return x.flip(0), None if weights is None else weights.flip(0)


def _positive(x):
    return x[x > 0].clone()


def _sneaky(x, y):
    y.add_(1)
    return x.clone()


def _leaky_view(x):
    return x.view(-1)


def _add_out(x, y, out):
    if out.shape != x.shape:
        raise ValueError(f"add.out: out must be {list(x.shape)}")  # as real out= kernels check
    torch.add(x, y, out=out)


pack4 = _define("pack4(Tensor x) -> Tensor", _pack4)
block_scales = _define("block_scales(Tensor x, int blocksize) -> Tensor", _block_scales)
full_like_shape = _define("full_like_shape(Tensor x, int[] size, ScalarType dtype) -> Tensor",
                          _full_like_shape)
row_stats = _define("row_stats(Tensor x) -> Tensor", _row_stats)
scale_ = _define("scale_(Tensor(a!) x, float alpha) -> Tensor(a!)", _scale_)
first_rows = _define("first_rows(Tensor(a) x, int n) -> Tensor(a)", _first_rows)
quant = _define("quant(Tensor x, float scale) -> (Tensor, Tensor?)", _quant)
positive = _define("positive(Tensor x) -> Tensor", _positive)
permute = _define("permute(Tensor x, Tensor? weights=None) -> (Tensor, Tensor?)", _permute)
sneaky = _define("sneaky(Tensor x, Tensor y) -> Tensor", _sneaky)
leaky_view = _define("leaky_view(Tensor x) -> Tensor", _leaky_view)
add_out = _define("add.out(Tensor x, Tensor y, *, Tensor(a!) out) -> ()", _add_out)


def _observe_all(op, samples: list[SampleInput], vary: bool = True):
    """Each sample and its variations, as real calls; rejected variations are no calls."""
    calls = []
    for sample in samples:
        calls.append(observe(op, sample.args, sample.kwargs).call)
        for v in variations(op, sample) if vary else ():
            try:
                calls.append(observe(op, v.sample.args, v.sample.kwargs).call)
            except (RuntimeError, ValueError, IndexError):
                pass
    return calls


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def test_search_finds_the_smallest_expression():
    calls = [c for c in _observe_all(pack4, [SampleInput((_x(3, 5),)), SampleInput((_x(4, 6),))])
             if len(c.arg("x").tensor.shape) == 2]  # the rank variations aside
    available = terms(calls)
    numel = [c.arg("x").tensor.numel for c in calls]
    assert search([(n + 1) // 2 for n in numel], available) == BinOp("ceil//", Numel("x"),
                                                                     Const(2))
    assert search([c.arg("x").tensor.shape[0] for c in calls], available) == Dim("x", 0)
    assert search([1] * len(calls), available) == Const(1)
    shape = [c.arg("x").tensor.shape for c in calls]
    got = search([s[0] * s[1] + 3 for s in shape], available)
    assert got is not None and [evaluate(got, c) for c in calls] == [s[0] * s[1] + 3
                                                                      for s in shape]


def test_packed_4bit():
    rule = infer(pack4, _observe_all(pack4, [SampleInput((_x(3, 5),)),
                                             SampleInput((_x(7, 9),))]))
    out = rule.outputs[0]
    assert out.shape == (BinOp("ceil//", Numel("x"), Const(2)), Const(1))
    assert out.dtype == DtypeRule("fixed", dtype="uint8")
    assert rule.held_out > 0 and rule.fitted_on + rule.held_out == len(
        _observe_all(pack4, [SampleInput((_x(3, 5),)), SampleInput((_x(7, 9),))]))


def test_blockwise_scales_divide_by_the_int_argument():
    samples = [SampleInput((_x(4, 64), 32)), SampleInput((_x(5, 48, dtype=torch.bfloat16), 16))]
    rule = infer(block_scales, _observe_all(block_scales, samples))
    assert rule.outputs[0].shape == (BinOp("ceil//", Numel("x"), IntArg("blocksize")),)
    assert rule.outputs[0].dtype == DtypeRule("fixed", dtype="float32")


def test_int_list_shape_and_scalar_type_dtype():
    samples = [SampleInput((_x(2), [3, 4], torch.float16)),
               SampleInput((_x(3), [5, 2, 6], torch.bfloat16))]
    rule = infer(full_like_shape, _observe_all(full_like_shape, samples))
    assert rule.outputs[0].shape == WholeShape("size")
    assert rule.outputs[0].dtype == DtypeRule("arg", arg="dtype")


def test_row_statistics_over_inputs_of_several_ranks():
    samples = [SampleInput((_x(4, 8),)), SampleInput((_x(2, 3, 8),)), SampleInput((_x(5, 6),))]
    rule = infer(row_stats, _observe_all(row_stats, samples))
    assert rule.outputs[0].shape == (BinOp("//", Numel("x"), Dim("x", -1)),)
    assert rule.outputs[0].dtype == DtypeRule("fixed", dtype="float32")


def test_inputs_of_several_ranks_keep_their_leading_dims():
    _lib.define("gate(Tensor x) -> Tensor")
    _lib.impl("gate", lambda x: x[..., : x.shape[-1] // 2] * x[..., x.shape[-1] // 2:], "CPU")
    op = resolve_overload(f"{NS}::gate.default")
    samples = [SampleInput((_x(4, 8),)), SampleInput((_x(2, 3, 6),)), SampleInput((_x(5, 4),))]
    rule = infer(op, _observe_all(op, samples))
    assert rule.outputs[0].shape == (LeadingDims("x", 1), BinOp("//", Dim("x", -1), Const(2)))


def test_returns_its_input_and_writes_it():
    rule = infer(scale_, _observe_all(scale_, [SampleInput((_x(3, 4), 2.0))]))
    assert rule.outputs[0].alias == AliasRule("input", "x")
    assert rule.writes == ["x"] and rule.defects == []


def test_returns_a_view():
    rule = infer(first_rows, _observe_all(first_rows, [SampleInput((_x(6, 4), 2)),
                                                       SampleInput((_x(9, 3), 5))]))
    out = rule.outputs[0]
    assert out.alias == AliasRule("view", "x")
    assert out.shape == (IntArg("n"), Dim("x", -1))
    assert rule.writes == [] and rule.defects == []


def test_optional_output_decided_by_a_float_argument():
    samples = [SampleInput((_x(3, 8), 0.5)), SampleInput((_x(4, 6), 0.0)),
               SampleInput((_x(2, 5), 1.0))]
    rule = infer(quant, _observe_all(quant, samples))
    q, scale = rule.outputs
    assert q.shape == (LeadingDims("x", 0),) and q.none_when is None
    assert q.dtype == DtypeRule("fixed", dtype="int8")
    assert scale.none_when == ("scale", "== 0")
    assert scale.shape == (LeadingDims("x", 1), Const(1))
    assert scale.dtype == DtypeRule("fixed", dtype="float32")


def test_an_output_never_seen_for_an_optional_tensor_given_is_refused_there():
    """A step that passes no weights saw output 1 None in every call; "always None" was
    verified and wrong where weights are given (fbgemm's permute_1D_sparse_data)."""
    rule = infer(permute, _observe_all(permute, [SampleInput((_x(6),)),
                                                 SampleInput((_x(9), None))]))
    assert rule.outputs[1].shape is None and rule.none_only == ("weights",)
    assert "for `weights` None only" in describe_rule(rule)[-1]
    source = emit_python([rule])
    assert 'torch._check(weights is None, lambda: "weights given: this fake saw no call' \
        in source and all(len(line) <= 100 for line in source.splitlines())
    compile(source, "emitted.py", "exec")
    given = infer(permute, _observe_all(permute, [SampleInput((_x(6), _x(6)))]))
    assert given.none_only == () and given.outputs[1].shape is not None


def test_data_dependent_size_is_unbacked_and_said():
    rule = infer(positive, _observe_all(positive, [SampleInput((_x(40),)),
                                                   SampleInput((_x(25),))]))
    assert isinstance(rule.outputs[0].shape[0], Unbacked)
    assert any("data-dependent" in note for note in rule.notes)


def test_a_slice_is_the_smaller_of_two_sizes():
    # x[:n] without a range check is min(n, x.shape[0]), not a formula that fits a few calls
    # by accident (`n - n // x.shape[0]` fits every call where n < 2 * x.shape[0])
    _lib.define("head(Tensor(a) x, int n) -> Tensor(a)")
    _lib.impl("head", lambda x, n: x[:n], "CPU")
    op = resolve_overload(f"{NS}::head.default")
    rule = infer(op, _observe_all(op, [SampleInput((_x(6, 4), 2)), SampleInput((_x(9, 3), 5))]))
    assert rule.outputs[0].shape[0] in (BinOp("min", IntArg("n"), Dim("x", 0)),
                                        BinOp("min", Dim("x", 0), IntArg("n")))


def test_a_larger_formula_fitted_only_with_the_held_out_calls_is_not_trusted():
    # n * n // 3 + 1 over n: outside the grammar; a size-7 formula that fits the fitted
    # calls must not be rescued by the held-out ones
    _lib.define("odd_rows(Tensor x, int n) -> Tensor")
    _lib.impl("odd_rows", lambda x, n: x.new_zeros(n * n // 3 + n % 5), "CPU")
    op = resolve_overload(f"{NS}::odd_rows.default")
    rule = infer(op, _observe_all(op, [SampleInput((_x(2), 4)), SampleInput((_x(2), 7)),
                                       SampleInput((_x(2), 10))]))
    assert isinstance(rule.outputs[0].shape[0], Unbacked)
    # equal inputs gave equal sizes: no formula, but not data-dependent, so never verified
    assert not rule.outputs[0].shape[0].data_dependent
    assert any("not shown data-dependent" in u for u in rule.unproven)


def test_formula_is_not_unbacked_where_one_exists(bundled):
    op = resolve_overload("aclcap::silu_and_mul.default")
    declared = list(samples_for("aclcap::silu_and_mul")(torch.device("cpu"), torch.float32))
    rule = infer(op, _observe_all(op, declared))
    assert rule.outputs[0].shape == (LeadingDims("input", 1),
                                     BinOp("//", Dim("input", -1), Const(2)))
    assert rule.outputs[0].dtype == DtypeRule("like", arg="input")
    assert rule.outputs[0].layout == LayoutRule("contiguous")


def test_bundled_mutating_ops_write_what_their_schema_marks(bundled):
    for name, writes in (("reshape_and_cache", ["key_cache", "value_cache"]),
                         ("rotary_embedding", ["query", "key"]),
                         ("fused_add_rms_norm", ["input", "residual"])):
        op = resolve_overload(f"aclcap::{name}.default")
        declared = list(samples_for(f"aclcap::{name}")(torch.device("cpu"), torch.float32))
        rule = infer(op, _observe_all(op, declared))
        assert rule.outputs == [] and rule.writes == writes and rule.defects == []


def test_bundled_two_outputs_dtype_like_and_fixed(bundled):
    op = resolve_overload("aclcap::get_masked_input_and_mask.default")
    declared = list(samples_for("aclcap::get_masked_input_and_mask")(torch.device("cpu"),
                                                                    torch.float32))
    ids, mask = infer(op, _observe_all(op, declared)).outputs
    assert ids.shape == mask.shape == (LeadingDims("input", 0),)
    assert ids.dtype == DtypeRule("like", arg="input")  # int64 and int32 samples
    assert mask.dtype == DtypeRule("fixed", dtype="bool")


def test_out_variant_returns_nothing_and_writes_out():
    x, y = _x(3, 4), _x(3, 4)
    rule = infer(add_out, _observe_all(add_out, [SampleInput((x, y), {"out": torch.empty(3, 4)})]))
    assert rule.outputs == [] and rule.writes == ["out"] and rule.defects == []


def test_schema_defects_name_the_corrected_line():
    rule = infer(sneaky, _observe_all(sneaky, [SampleInput((_x(3), _x(3)))]))
    assert [d.message for d in rule.defects] == [
        "writes `y` but the schema does not mark it mutable (`Tensor(a!) y`)"]
    assert rule.defects[0].corrected_schema == "sneaky(Tensor x, Tensor(a!) y) -> Tensor"
    rule = infer(leaky_view, _observe_all(leaky_view, [SampleInput((_x(3, 2),))]))
    assert rule.outputs[0].alias == AliasRule("view", "x")
    assert [d.message for d in rule.defects] == [
        "output 0 is a view of `x` but the schema does not annotate the alias"]
    assert rule.defects[0].corrected_schema == "leaky_view(Tensor(a) x) -> Tensor(a)"


def test_corrected_schema_keeps_existing_sets_and_defaults():
    schema = "ns::f.out(Tensor(a!) x, Tensor y, int[] s=[1, 2], *, Tensor? z=None) -> " \
             "(Tensor, Tensor)"
    assert OpSchema.parse(schema).corrected(["x", "z"], {1: "y"}).text(False) == (
        "f.out(Tensor(a!) x, Tensor(b) y, int[] s=[1, 2], *, Tensor(c!)? z=None) -> "
        "(Tensor, Tensor(b))")


def test_held_out_every_third_call():
    assert held_out(2) == [] and held_out(7) == [2, 5]
    assert held_out(7, 1) == [0, 3, 6] and held_out(7, 2) == [1, 4]


def test_a_change_held_out_alone_is_fitted_with_another_third_held_out():
    """The only calls that change `block` are the held-out third's: the formula fitted on
    the others cannot know it. Another third held out finds it, checked on that third."""
    op = _define("padded_len(Tensor ids, int experts, int block) -> Tensor",
                 lambda ids, e, b: ids.new_zeros(ids.numel() + e * (b - 1)))
    ids = torch.zeros(5, 2, dtype=torch.long)
    args = [(ids, 4, 4), (ids[:3], 4, 4), (ids, 4, 8), (ids[:4], 4, 4), (ids, 6, 4),
            (ids, 4, 5), (ids[:2], 8, 4), (ids[:1], 4, 4), (ids, 4, 3)]
    calls = [observe(op, a).call for a in args]
    rule = infer(op, calls)
    assert rule.outputs[0].shape == (BinOp("+", Numel("ids"), BinOp("*", IntArg("experts"),
                                     BinOp("-", IntArg("block"), Const(1)))),), rule.notes
    assert any("another third of the calls held out" in n for n in rule.notes)


def test_non_tensor_output_is_refused():
    _lib.define("count(Tensor x) -> int")
    _lib.impl("count", lambda x: int(x.numel()), "CPU")
    op = resolve_overload(f"{NS}::count.default")
    with pytest.raises(SynthesisError, match="output 0 is int"):
        infer(op, [observe(op, (_x(3),)).call])


def _terms(**columns: list[int]) -> list:
    """Terms named `a`, `b`, ... as int arguments, each a column of values over the calls."""
    from aclcap.meta.synthesize.expr_search import Term

    return [Term(IntArg(name), tuple(values)) for name, values in columns.items()]


def test_sums_of_products_and_scaled_divisions_are_searched_exhaustively():
    from aclcap.meta.synthesize.emit_python import expr_source
    from aclcap.meta.synthesize.rules import ItemSize

    numel = [6, 14, 20, 9, 33, 12, 40, 7]
    experts = [4, 8, 5, 4, 8, 5, 3, 6]
    block = [16, 32, 17, 4, 16, 8, 32, 5]
    available = _terms(numel=numel, experts=experts, block=block)
    moe = search([n + e * (b - 1) for n, e, b in zip(numel, experts, block, strict=True)],
                 available)
    assert expr_source(moe) == "numel + experts * (block - 1)"
    # a ScalarType's itemsize divides packed storage: (numel + 1) // (2 * itemsize)
    from aclcap.meta.synthesize.expr_search import Term

    itemsize = [1, 4, 2, 2, 1, 4, 2, 1]
    packed = search([(n + 1) // (2 * i) for n, i in zip(numel, itemsize, strict=True)],
                    [*_terms(numel=numel), Term(ItemSize("storage"), tuple(itemsize))])
    assert evaluate_all(packed, numel, itemsize) == [
        (n + 1) // (2 * i) for n, i in zip(numel, itemsize, strict=True)]
    assert "storage.itemsize" in expr_source(packed)
    broadcast = search([max(a, b) for a, b in zip(numel, block, strict=True)],
                       _terms(numel=numel, block=block))
    assert expr_source(broadcast) == "torch.sym_max(numel, block)"
    assert search([n * n * e + 3 for n, e in zip(numel, experts, strict=True)],
                  available) is None  # past the bounds: data-dependent, said as such


def evaluate_all(expr, numel: list[int], itemsize: list[int]) -> list[int]:
    from aclcap.meta.synthesize.emit_python import expr_source

    source = expr_source(expr).replace("storage.itemsize", "i")
    return [eval(source, {"numel": n, "i": i}) for n, i in zip(numel, itemsize, strict=True)]


def test_packed_rows_and_jagged_widths_are_a_product_divided():
    """fbgemm's n-bit rows: `ceil(C / (8 // bits)) + 4` bytes and back `(C - 4) * (8 //
    bits)` values (its kernel takes bits of 3 and 5 too); a jagged mat-vec's width
    `H * D * B // (B * H)`: each was "no formula fits"."""
    from aclcap.meta.synthesize.emit_python import expr_source

    cols = [16, 32, 48, 8, 24, 64, 40, 16, 36, 5, 13, 20]
    bits = [4, 4, 2, 8, 2, 4, 8, 8, 2, 4, 3, 5]
    packed = [-(-c // (8 // b)) + 4 for c, b in zip(cols, bits, strict=True)]
    assert expr_source(search(packed, _terms(cols=cols, bits=bits))) == \
        "-(-cols // (8 // bits)) + 4"
    back = [(p - 4) * (8 // b) for p, b in zip(packed, bits, strict=True)]
    assert expr_source(search(back, _terms(packed=packed, bits=bits))) == \
        "(packed - 4) * (8 // bits)"
    batch, heads, width = [2, 4, 3, 1, 5, 2, 6, 4, 3], [2, 1, 3, 2, 1, 4, 2, 3, 1], \
        [4, 8, 3, 16, 5, 2, 7, 4, 6]
    found = search(width, _terms(v0=[b * h for b, h in zip(batch, heads, strict=True)],
                                 a1=[h * d for h, d in zip(heads, width, strict=True)],
                                 offsets=[b + 1 for b in batch]))
    assert expr_source(found) == "(offsets - 1) * a1 // v0"


def test_sums_are_written_as_people_write_them():
    from aclcap.meta.synthesize.emit_python import expr_source
    from aclcap.meta.synthesize.expr_search import simplify

    assert expr_source(simplify(BinOp("+", Const(1), BinOp("-", Dim("x", 0), IntArg("w"))))) \
        == "x.shape[0] - w + 1"


def test_unnamed_alias_sets_are_read_from_the_structured_schema():
    lib = torch.library.Library("aclcap_aliastest", "DEF")
    lib.define("norm(Tensor! out, Tensor input, Tensor? weight, float eps) -> ()")
    op = torch.ops.aclcap_aliastest.norm.default
    assert "$0" in str(op._schema)  # what torch prints, and its own parser rejects
    schema = OpSchema.of(op)
    assert schema.text() == ("aclcap_aliastest::norm(Tensor(a!) out, Tensor input, "
                             "Tensor? weight, float eps) -> ()")
    assert schema.args[0].write and torch._C.parse_schema(schema.text())


def test_cpp_signatures_parse_and_read_as_people_write_them():
    from aclcap.meta.synthesize.emit_cpp import pretty_type
    from aclcap.meta.synthesize.signatures import parse_signature

    sig = parse_signature("std::tuple<at::Tensor, at::Tensor> (at::Tensor const&, at::Tensor&, "
                          "std::optional<at::Tensor>, long, c10::ArrayRef<long>)")
    assert sig is not None and sig.ret == "std::tuple<at::Tensor, at::Tensor>"
    assert [pretty_type(p) for p in sig.params] == [
        "const at::Tensor&", "at::Tensor&", "std::optional<at::Tensor>", "int64_t",
        "at::IntArrayRef"]
    assert pretty_type("std::__cxx11::basic_string<char, std::char_traits<char>, "
                       "std::allocator<char> > const&") == "const std::string&"
    assert parse_signature("garbage") is None


def test_comments_wrap_between_words_never_inside_code_or_lists():
    from aclcap.meta.synthesize.emit_python import comment_lines

    text = ("output 0 follows `q.shape[-1]` in every call, and [q.shape[0], q.shape[1], "
            "v.shape[-1]] is the rule; Traceback (most recent call last) is never copied")
    lines = comment_lines(text + "\nTraceback (most recent call last):\n  File x", "    ", "#",
                          width=44)
    assert all(len(line) <= 44 for line in lines)
    joined = " ".join(line.removeprefix("    # ") for line in lines)
    assert "`q.shape[-1]`" in [w for w in joined.split() if "q.shape[-1]" in w]
    assert "[q.shape[0], q.shape[1], v.shape[-1]]" in "\n".join(lines)
    assert "File x" not in joined


def test_tied_dims_and_empty_calls_are_unproven_not_verified():
    attn = _define("tied(Tensor q, Tensor v) -> Tensor",
                   lambda q, v: q.new_zeros(q.shape[0], v.shape[-1]))
    # every call has equal head dims and none varies v's alone: which one is unproven
    calls = [observe(attn, (_x(n, d), _x(n + 3, d))).call for n, d in ((2, 8), (3, 16), (5, 12))]
    rule = infer(attn, calls)
    assert rule.unproven == ["output 0 follows `q` dim 1, which equalled `v` dim 1 in every "
                             "call: give a sample where they differ"]
    # a kernel that rejects the head dims differing ties them: nothing left unproven
    assert infer(attn, calls, rejected=["v dim 1 alone: 8 -> 16"]).unproven == []
    empty = _define("empty_rows(Tensor x) -> Tensor", lambda x: x.new_zeros(0, 4))
    rule = infer(empty, [observe(empty, (_x(0, 4),)).call])
    assert rule.unproven == ["output 0 had a dim of 0 in every call (every call was empty "
                             "there): its size for non-empty inputs is unproven"]


def _segment_sum(src, indptr):
    d = indptr.dim() - 1
    counts = indptr.diff(dim=-1)
    return src.new_zeros([*src.shape[:d], counts.shape[-1], *src.shape[d + 1:]])


def test_a_segment_reduction_runs_along_its_offsets_tensor_s_last_dim():
    """torch-scatter's segment_*_csr: `src`'s dim `indptr.dim() - 1` becomes
    `indptr.shape[-1] - 1`, over any rank of `src` and batched `indptr` (issue 49 item 7:
    the fake said "rank 2 only" and raised on the ranks the kernel takes)."""
    op = _define("segment_sum(Tensor src, Tensor indptr) -> Tensor", _segment_sum)
    ptr = torch.tensor([0, 2, 2, 7])
    args = [(_x(7, 3), ptr), (_x(7), ptr), (_x(7, 3, 5), ptr), (_x(7, 4), ptr[:3]),
            (_x(2, 7, 3), torch.stack([ptr, ptr])), (_x(9, 3), torch.tensor([0, 9])),
            (_x(2, 7), torch.stack([ptr, ptr])), (_x(7, 2), ptr)]
    rule = infer(op, [observe(op, a).call for a in args])
    assert rule.outputs[0].shape == AlongDim("src", "", (BinOp("-", Dim("indptr", -1),
                                                                Const(1)),), rank_of="indptr")
