"""The synthesis emitters: from the answer keys' hand-written OpRules
(tests/fixtures/synth_answers.py), emit_python and emit_cpp write fakes that are ruff- and
lint-clean and that, loaded in a fresh process against the fixture library (which has no
fakes of its own), equal the hand-written fakes and the real kernels on calls at sizes the
samples never had, and trace with torch.compile(fullgraph=True, dynamic=True). Also: the
bundled library loads without its meta impls, for synthesis to regenerate them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aclcap.meta.lint import lint
from aclcap.meta.synthesize import emit_cpp, emit_python
from aclcap.meta.synthesize.rules import (
    BinOp,
    Const,
    Dim,
    DtypeRule,
    IntArg,
    LayoutRule,
    LeadingDims,
    Numel,
    OpRule,
    OutputRule,
    Unbacked,
    WholeShape,
)
from tests.conftest import ROOT, aclcap_process
from tests.fixtures.synth_answers import ANSWER_FAKES, ANSWER_RULES

FIXTURES = ROOT / "tests" / "fixtures"
DATA_DEPENDENT = "aclcap_synth::nonzero_rows.default"


def _compare(*libs: Path, compile_ops: bool = True) -> dict:
    """synth_compare.py in its own process: the fixture library, then `libs`."""
    args = [sys.executable, str(FIXTURES / "synth_compare.py"), str(FIXTURES / "synth_ops.py"),
            *map(str, libs), *([] if compile_ops else ["--no-compile"])]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def emitted_python(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "synth_fakes.py"
    path.write_text(emit_python.emit_python(ANSWER_RULES, header="From the answer keys."))
    return path


@pytest.fixture(scope="module")
def emitted_cpp() -> Path:
    # A fixed path under build/: ninja rebuilds it only when the emitted text changes.
    path = ROOT / "build" / "synth-meta" / "synth_metas.cpp"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = emit_cpp.emit_cpp(ANSWER_RULES, header="From the answer keys.")
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


@pytest.mark.parametrize(("expr", "python", "cpp"), [
    (BinOp("ceil//", Numel("x"), IntArg("blocksize")), "-(-x.numel() // blocksize)",
     "(x.sym_numel() + blocksize - 1) / blocksize"),
    (BinOp("//", BinOp("+", Numel("w"), Const(1)), Const(2)), "(w.numel() + 1) // 2",
     "(w.sym_numel() + 1) / 2"),
    (BinOp("-", Dim("x", 0), BinOp("+", Dim("x", 1), Const(1))),
     "x.shape[0] - (x.shape[1] + 1)", "x.sym_size(0) - (x.sym_size(1) + 1)"),
    (BinOp("*", BinOp("-", Dim("x", -1), Const(2)), IntArg("shape", 1)),
     "(x.shape[-1] - 2) * shape[1]", "(x.sym_size(-1) - 2) * shape[1]"),
    (BinOp("*", Dim("x", 0), BinOp("ceil//", Numel("x"), IntArg("b"))),
     "x.shape[0] * -(-x.numel() // b)", "x.sym_size(0) * ((x.sym_numel() + b - 1) / b)"),
    (BinOp("//", Numel("xs", item=1), Dim("xs", -1, item=1)),
     "xs[1].numel() // xs[1].shape[-1]", "xs[1].sym_numel() / xs[1].sym_size(-1)"),
])
def test_expressions_are_written_with_the_right_precedence(expr, python, cpp):
    assert emit_python.expr_source(expr) == python
    assert emit_cpp.expr_source(expr) == cpp


@pytest.mark.parametrize("outer", [None, "*", "//", "-"])
def test_ceil_division_rounds_up_in_both_languages(outer):
    """Evaluated, not only read: ceil(rows * k / b), alone and as the right operand of
    another operation (where C++'s written-out form needs its parentheses)."""
    expr = BinOp("ceil//", BinOp("*", Dim("x", 0), IntArg("k")), IntArg("b"))
    if outer:
        expr = BinOp(outer, IntArg("n"), expr)
    for rows, k, b in ((7, 3, 4), (8, 2, 4), (1, 1, 64), (5, 5, 3)):
        ceil = -(-rows * k // b)
        want = {None: ceil, "*": 100 * ceil, "//": 100 // ceil, "-": 100 - ceil}[outer]
        x = type("T", (), {"shape": (rows,)})
        names = {"x": x, "k": k, "b": b, "n": 100}
        assert eval(emit_python.expr_source(expr), names) == want
        cpp = emit_cpp.expr_source(expr).replace("x.sym_size(0)", str(rows))
        assert eval(cpp.replace("/", "//"), names) == want  # SymInt / floors


def test_emitted_python_is_ruff_and_lint_clean(emitted_python):
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run([str(ruff), "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(emitted_python)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    assert lint([emitted_python]) == []
    text = emitted_python.read_text()
    assert text.count("@torch.library.register_fake(") == len(ANSWER_RULES)
    assert "-(-x.numel() // blocksize)" in text  # ceil division kept symbolic
    assert "torch.library.get_ctx().new_dynamic_size()" in text  # the data-dependent op
    assert "    return x\n" in text  # returns its input


def test_emitted_python_equals_answer_keys_and_kernels_on_unseen_calls(emitted_python):
    result = _compare(emitted_python)
    assert result["mismatches"] == []
    assert set(result["checked"]) == set(ANSWER_FAKES)


def test_a_wrong_formula_is_caught_at_unseen_sizes(tmp_path):
    """The comparison can fail: `numel // 2` is right for every even count, wrong for an
    odd one, and the unseen calls have one."""
    rule = next(r for r in ANSWER_RULES if r.op == "aclcap_synth::pack_int4.default")
    wrong = type(rule)(rule.op, rule.schema, [OutputRule(
        (BinOp("//", Numel("w"), Const(2)), Const(1)), rule.outputs[0].dtype)])
    path = tmp_path / "wrong.py"
    path.write_text(emit_python.emit_python([wrong]))
    mismatches = _compare(path, compile_ops=False)["mismatches"]
    # both unseen calls have an odd count (91, 135): the answer key and the kernel disagree
    assert len(mismatches) == 4
    assert sum("pack_int4.default at [(7, 13)]: fake [((45, 1)" in m for m in mismatches) == 2
    assert sum("pack_int4.default at [(5, 3, 9)]: fake [((67, 1)" in m for m in mismatches) == 2


def test_verification_outcome_is_written_above_each_function():
    rule = next(r for r in ANSWER_RULES if r.op == "aclcap_synth::row_rms.default")
    failed = type(rule)(rule.op, rule.schema, rule.outputs, evidence="6 calls; float32",
                        verified="fake vs real: shape [3] but the kernel gives [4]")
    text = emit_python.function_source(failed)
    assert "# NOT VERIFIED, failed: fake vs real: shape [3] but the kernel gives [4]" in text
    assert "// NOT VERIFIED, failed: fake vs real" in emit_cpp.function_source(failed)
    passed = type(rule)(rule.op, rule.schema, rule.outputs, verified="verified on 4 unseen calls")
    assert "# Checks passed: verified on 4 unseen calls." in emit_python.function_source(passed)
    unseen = type(rule)(rule.op, rule.schema, rule.outputs, notes=["dim 0 varies per call"],
                        verified="NOT verified: no call was left unseen to verify it on")
    text = emit_python.function_source(unseen)
    assert "# NOT verified: no call was left unseen to verify it on\n" in text
    assert "failed" not in text and "# Note: dim 0 varies per call\n" in text


def test_emitted_cpp_is_lint_clean_and_leaves_the_data_dependent_op_to_python(emitted_cpp):
    assert lint([emitted_cpp]) == []
    text = emitted_cpp.read_text()
    assert "TORCH_LIBRARY_IMPL(aclcap_synth, Meta, m) {" in text
    assert 'm.impl("nonzero_rows"' not in text
    assert "nonzero_rows.default: an output size is data-dependent" in text
    assert text.count("m.impl(") == len(ANSWER_RULES) - 1


def test_emitted_cpp_compiles_and_equals_answer_keys_on_unseen_calls(emitted_cpp):
    library = emit_cpp.build_meta_library(emitted_cpp, emitted_cpp.parent)
    result = _compare(library)
    assert result["mismatches"] == []
    assert set(result["checked"]) == set(ANSWER_FAKES) - {DATA_DEPENDENT}


def test_bundled_library_loads_without_its_metas():
    code = """
import torch
import aclcap_ops, aclcap_ops.nometa
from aclcap.errors import UsageError
names = [f"aclcap::{n}" for n in aclcap_ops.OPS] + ["aclcap::rms_norm.out",
                                                    "aclcap::silu_and_mul.out"]
has = lambda key: [n for n in names if torch._C._dispatch_has_kernel_for_dispatch_key(n, key)]
aclcap_ops.load()  # a model file's own load(): takes the library as loaded, no metas
print(has("Meta"), len(has("CPU")) == len(names))
try:
    aclcap_ops.load(metas=True)
except UsageError as exc:
    print(exc)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kernels, error = proc.stdout.splitlines()
    assert kernels == "[] True"  # no Meta kernel on any overload, every CPU kernel there
    assert "already loaded without its meta impls" in error
    from aclcap.build import NO_META_CPU, cpu_library_path, default_build_dir

    # only the file its define changes is compiled again: the kernels' objects are linked
    built = cpu_library_path(default_build_dir(), NO_META_CPU).parent
    assert [p.name for p in built.glob("*.o")] == ["registration.o"]


def test_check_meta_on_the_bundled_library_without_metas_reads_missing():
    run = aclcap_process("check-meta", "--lib", "aclcap_ops.nometa", "--json", "-")
    assert run.code == 1, run.stderr
    kinds = {r["op"]: r["status"] for r in run.json()["results"]}
    assert kinds["aclcap::silu_and_mul.default"] == "missing"
    assert kinds["aclcap::rms_norm.default"] == "missing"
    assert kinds["aclcap::get_masked_input_and_mask.default"] == "missing"


def test_the_build_without_metas_has_its_own_folder_name_and_key(tmp_path):
    from aclcap.build import DEFAULT_CPU, NO_META_CPU, _cpu_key, cpu_library_path, ops_dir

    assert cpu_library_path(tmp_path) == tmp_path / "cpu" / "aclcap_ops_cpu.so"  # as before
    assert cpu_library_path(tmp_path, NO_META_CPU).parent == tmp_path / "cpu-nometa"
    assert NO_META_CPU.name != DEFAULT_CPU.name  # both .so files can sit in one cache
    assert _cpu_key(ops_dir(), NO_META_CPU) != _cpu_key(ops_dir(), DEFAULT_CPU)
    assert "#ifndef ACLCAP_NO_META" in (ops_dir() / "csrc" / "registration.cpp").read_text()


def test_cpp_says_why_it_leaves_out_an_op_it_cannot_write():
    rule = next(r for r in ANSWER_RULES if r.op == "aclcap_synth::row_rms.default")
    odd = type(rule)("aclcap_synth::gen.default", "aclcap_synth::gen(Tensor x, Generator? g) "
                     "-> Tensor", rule.outputs)
    text = emit_cpp.emit_cpp([rule, odd])
    assert 'm.impl("row_rms", TORCH_FN(row_rms_meta));' in text and 'm.impl("gen"' not in text
    flat = " ".join(line.removeprefix("// ") for line in text.splitlines())  # comments wrap
    assert "aclcap_synth::gen.default: no C++ Meta kernel emitted: no C++ parameter type for " \
           "schema type 'Generator?'" in flat


def test_a_fake_reads_as_a_reviewer_would_write_it():
    """Issue 57 item 6: a whole shape is `x.shape` and new_empty's own dtype is left to it;
    a shape of dims alone holds for one rank only and stays a list."""
    def source(shape, dtype_of):
        rule = OpRule("ns::f.default", "ns::f(Tensor x, Tensor w) -> Tensor",
                      [OutputRule(shape, DtypeRule("like", arg=dtype_of))])
        return emit_python.function_source(rule)

    assert "return x.new_empty(x.shape)\n" in source((LeadingDims("x", 0),), "x")
    assert "return x.new_empty(x.shape, dtype=w.dtype)\n" in source((LeadingDims("x", 0),), "w")
    assert "return x.new_empty(x.shape)\n" in source((LeadingDims("x", 1), Dim("x", -1)), "x")
    assert "return x.new_empty([x.shape[0]])\n" in source((Dim("x", 0),), "x")


def test_emitted_locals_never_shadow_an_argument():
    """An argument named like one of the emitter's own variables (ctx, out0, size) keeps its
    value: the variables step aside."""
    rule = OpRule("ns::f.default", "ns::f(Tensor x, int ctx, int out0) -> (Tensor, Tensor)", [
        OutputRule((Unbacked(0, 9), IntArg("ctx")), DtypeRule("like", arg="x")),
        OutputRule((IntArg("out0"),), DtypeRule("like", arg="x"))])
    text = emit_python.function_source(rule)
    assert "out0_ = x.new_empty([torch.library.get_ctx().new_dynamic_size(), ctx])" in text
    assert "out1 = x.new_empty([out0])" in text
    assert "return out0_, out1" in text
    cpp = emit_cpp.function_source(OpRule(
        "ns::g.default", "ns::g(Tensor x, Tensor(a!) result0, int result) -> (Tensor, Tensor)",
        [OutputRule((IntArg("result"),), DtypeRule("like", arg="x"))] * 2))
    assert "  at::Tensor result_0 = at::empty_symint(c10::SymDimVector{result}" in cpp
    assert "return {result_0, result_1};" in cpp


TYPED_SCHEMAS = {  # schema types real libraries use, each kernel registered against its def
    "t_symint": "t_symint(Tensor x, SymInt n, SymInt[] shape, int[]? dims, float? f, "
                "ScalarType? dt, str mode) -> Tensor",
    "t_lists": "t_lists(Tensor[] xs, Tensor? bias, Scalar alpha, int? k, bool? flag, bool b) "
               "-> Tensor",
    "t_layout": "t_layout(Tensor x, Layout? layout, Device? device, int k) -> Tensor",
}


def test_emitted_cpp_signatures_register_against_their_schemas(tmp_path):
    """The C++ parameter types match what the dispatcher infers for each schema type: a
    mismatch fails at m.impl when the library loads. Then each kernel runs on fake tensors."""
    ns = "aclcap_synth_types"
    rules = [
        OpRule(f"{ns}::t_symint.default", f"{ns}::{TYPED_SCHEMAS['t_symint']}",
               [OutputRule(WholeShape("shape"), DtypeRule("like", arg="x"))]),
        OpRule(f"{ns}::t_lists.default", f"{ns}::{TYPED_SCHEMAS['t_lists']}",
               [OutputRule((Dim("xs", 0, item=0), Numel("xs", item=1)),
                           DtypeRule("fixed", dtype="float16"))]),
        OpRule(f"{ns}::t_layout.default", f"{ns}::{TYPED_SCHEMAS['t_layout']}",
               [OutputRule((Dim("x", 0), BinOp("//", Dim("x", 1), IntArg("k"))),
                           DtypeRule("like", arg="x"), LayoutRule("like", "x"))]),
    ]
    source = ROOT / "build" / "synth-meta" / "typed_metas.cpp"
    defs = "".join(f'  m.def("{schema}");\n' for schema in TYPED_SCHEMAS.values())
    text = emit_cpp.emit_cpp(rules) + f"\nTORCH_LIBRARY({ns}, m) {{\n{defs}}}\n"
    if not source.exists() or source.read_text() != text:
        source.write_text(text)
    assert lint([source]) == []
    library = emit_cpp.build_meta_library(source, source.parent)
    code = f"""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
torch.ops.load_library({str(library)!r})
ops = torch.ops.{ns}
with FakeTensorMode():
    x = torch.empty(6, 8)
    a = ops.t_symint(x, 3, [2, 5], None, None, None, "m")
    b = ops.t_lists([torch.empty(4, 2), torch.empty(3, 3)], None, 1.0, None, None, True)
    c = ops.t_layout(torch.empty(8, 6).t(), None, None, 2)
print(list(a.shape), list(b.shape), b.dtype, list(c.shape), c.stride())
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # t_layout follows x's stride order (x is transposed): [6, 4] column-major
    assert proc.stdout.split() == "[2, 5] [4, 9] torch.float16 [6, 4] (1, 6)".split()


def test_emitted_python_follows_an_inputs_stride_order_at_another_shape(tmp_path):
    ns = "aclcap_synth_pylayout"
    rule = OpRule(f"{ns}::t_layout.default", f"{ns}::{TYPED_SCHEMAS['t_layout']}",
                  [OutputRule((Dim("x", 0), BinOp("//", Dim("x", 1), IntArg("k"))),
                              DtypeRule("like", arg="x"), LayoutRule("like", "x"))])
    fakes = tmp_path / "layout_fakes.py"
    fakes.write_text(emit_python.emit_python([rule]))
    assert "_empty_in_order_of(x, [x.shape[0], x.shape[1] // k], x.dtype)" in fakes.read_text()
    code = f"""
import importlib.util, torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
lib = torch.library.Library({ns!r}, "DEF")
lib.define({TYPED_SCHEMAS['t_layout']!r})
spec = importlib.util.spec_from_file_location("fakes", {str(fakes)!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec))
mode = FakeTensorMode(shape_env=ShapeEnv())
x = mode.from_tensor(torch.empty(8, 6).t())  # symbolic sizes, column-major
with mode:
    c = torch.ops.{ns}.t_layout(x, None, None, 2)
print(list(c.shape))
print(c.stride())
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shape, strides = proc.stdout.splitlines()
    assert "//" in shape and strides.startswith("(1, ")  # symbolic sizes, column-major


def test_emitted_python_carries_schema_defaults(tmp_path):
    """torch drops defaulted arguments before calling a fake: without the defaults in its
    signature the fake raises TypeError at `op(x)`."""
    ns = "aclcap_synth_defaults"
    schema = ("f(Tensor x, int k=2, int[] shape=[1, 2], *, float eps=1e-06, bool flag=False, "
              'ScalarType dtype=float, ScalarType? out_dtype=None, str mode="a") -> Tensor')
    rule = OpRule(f"{ns}::f.default", f"{ns}::{schema}", [OutputRule(
        (Dim("x", 0), BinOp("ceil//", Dim("x", 1), IntArg("k"))), DtypeRule("arg", arg="dtype"))])
    fakes = tmp_path / "default_fakes.py"
    fakes.write_text(emit_python.emit_python([rule]))
    ruff = subprocess.run([str(Path(sys.executable).with_name("ruff")), "check", "--no-cache",
                           "--config", str(ROOT / "pyproject.toml"), str(fakes)],
                          capture_output=True, text=True)
    assert ruff.returncode == 0, ruff.stdout
    assert "x, k=2, shape=(1, 2), *, eps=1e-06, flag=False, dtype=torch.float32, " \
           "out_dtype=None, mode='a'," in " ".join(fakes.read_text().split())  # one per line
    code = f"""
import importlib.util, torch
from torch._subclasses.fake_tensor import FakeTensorMode
lib = torch.library.Library({ns!r}, "DEF")
lib.define({schema!r})
spec = importlib.util.spec_from_file_location("fakes", {str(fakes)!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec))
with FakeTensorMode():
    a = torch.ops.{ns}.f(torch.empty(3, 7, dtype=torch.bfloat16))
    b = torch.ops.{ns}.f(torch.empty(3, 7), 4, dtype=torch.int8)
print(list(a.shape), a.dtype, list(b.shape), b.dtype)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == "[3, 4] torch.float32 [3, 2] torch.int8".split()
