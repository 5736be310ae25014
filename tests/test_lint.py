"""check-meta --lint: concrete sizes in meta impls, file:line and a fix, escapes honoured."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from aclcap.meta import lint as lint_module
from aclcap.meta.lint import ESCAPE, lint
from tests.conftest import ROOT, aclcap

FIXTURES = ROOT / "tests" / "fixtures"
LINT = FIXTURES / "lint"
ASCEND = LINT / "csrc" / "meta" / "ascend_style_meta.cpp"

# Each registration form in its own fixture, and the (line, rule) findings it must give:
# nothing from the CPU/NPU kernels, comments, strings or escaped lines beside them.
FORMS = {
    "one_line_block.cpp": [(6, "size()")],
    "multi_line_block.cpp": [
        (6, "std::vector<int64_t>"), (7, "sizes()"), (8, "numel()"),
        (9, "SmallVector<int64_t>"), (15, "at::empty({...})"), (16, ".item()"),
        (17, "at::empty({...})")],
    "expand_qualified.cpp": [
        (14, "at::empty({...})"), (14, "size()")],
    # empty_symint({...}) only where an int64_t overload of that name exists
    "symint_overloads.cpp": [(22, "empty_symint({...})")],
    "lib_name.cpp": [(5, "at::empty({...})"), (5, "size()"), (6, "numel()")],
    "torch_fn.cpp": [(6, "size()"), (7, "size()"), (8, "size()"), (9, "size()"),
                     (11, "size()")],
    "lambda.cpp": [(10, "size()")],
    "dispatch_key.cpp": [(5, "size()"), (6, "numel()"), (7, "sizes()")],
    "library_impl.py": [(10, "int(size)"), (20, ".item()"), (25, "int(size)"),
                        (30, ".tolist()")],
    "register_fake.py": [(7, "int(size)"), (11, "int(size)"), (21, ".item()")],
    "impl_abstract.py": [(9, "int(size)"), (14, ".tolist()")],
    "custom_op.py": [(8, "int(size)")],
    "lint_fakes.py": [(8, "int(size)"), (14, ".item()")],
    # List lengths, typed by their declarations, are not findings; Tensors' sizes still are.
    "list_lengths.cpp": [],
    "typed_tensor_sizes.cpp": [
        (8, "size()"), (9, "size()"), (10, "numel()"), (12, "size()"), (13, "size()"),
        (14, "numel()"), (16, "size()"), (17, "size()")],
}


def test_bundled_ops_are_lint_clean():
    assert lint([ROOT / "aclcap_ops"]) == []


def test_bundled_meta_kernel_is_found_across_files(tmp_path: Path):
    """The bundled Meta block (registration.cpp) names aclcap::silu_and_mul_meta, defined in
    activation.cpp: with a concrete size planted there, the clean result above is no
    accident of finding nothing."""
    csrc = tmp_path / "csrc"
    shutil.copytree(ROOT / "aclcap_ops" / "csrc", csrc)
    activation = csrc / "activation.cpp"
    planted = "c10::SymDimVector sizes(input.sizes().begin(), input.sizes().end());"
    text = activation.read_text().replace(
        "c10::SymDimVector sizes(input.sym_sizes().begin(), input.sym_sizes().end());", planted)
    activation.write_text(text)
    line = text.split("\n").index(f"  {planted}") + 1
    assert [(Path(f.file).name, f.line, f.rule) for f in lint([tmp_path])] == [
        ("activation.cpp", line, "sizes()")]


def test_cpp_meta_kernel_using_size_is_found():
    findings = lint([FIXTURES / "badops.cpp"])
    assert {(Path(f.file).name, f.rule) for f in findings} == {
        ("badops.cpp", "size()"), ("badops.cpp", "at::empty({...})")}
    assert all("x.size(0)" in f.code for f in findings)
    # The CPU kernels beside it use size() too, legitimately: only Meta kernels are linted.
    assert len({f.line for f in findings}) == 1


def test_python_fakes_and_escape_comment():
    findings = lint([LINT / "lint_fakes.py"])
    assert [(f.line, f.rule) for f in findings] == [(8, "int(size)"), (14, ".item()")]
    assert "symbolic" in findings[0].hint


def test_one_line_meta_block():
    """The regex lint required a Meta block to end on a line of its own, so it read none of
    `TORCH_LIBRARY_IMPL(ns, Meta, m) { m.impl("rowsum", &rowsum_meta); }`."""
    path = LINT / "one_line_block.cpp"
    assert [f.to_dict() for f in lint([path])] == [{
        "file": str(path), "line": 6, "column": 47, "rule": "size()", "rule_id": "ACL101",
        "code": "return x.new_empty_symint(c10::SymDimVector{x.size(0)});",
        "hint": "use sym_size(i): size(i) specializes the dim"}]


@pytest.mark.parametrize("name", FORMS)
def test_registration_form(name: str):
    findings = lint([LINT / name])
    assert [(f.line, f.rule) for f in findings] == FORMS[name]
    assert all(f.hint for f in findings)


def test_long_meta_file_gives_exactly_the_planted_finding(tmp_path: Path):
    """Over 1,000 lines of meta impls that take list lengths (list_lengths.cpp's impl, once per
    op, each registered) and one Tensor size planted in the middle: exactly that finding."""
    source = (LINT / "list_lengths.cpp").read_text()
    body = source[source.index("at::Tensor grouped_matmul_meta("):
                  source.index("}  // namespace listlen")]
    parts, registrations = ["#include <torch/library.h>\n", "namespace listlen {\n"], []
    for i in range(48):
        impl = body.replace("grouped_matmul_meta", f"grouped_{i}_meta")
        if i == 30:
            impl = impl.replace("auto first = group_list[0];",
                                "auto first = group_list[0] + x.size(1);")
        parts.append(impl)
        registrations.append(f'  m.impl("grouped_{i}", &listlen::grouped_{i}_meta);')
    text = "".join(parts) + "}  // namespace listlen\n\nTORCH_LIBRARY_IMPL(listlen, Meta, m) {\n" \
        + "\n".join(registrations) + "\n}\n"
    big = tmp_path / "big_meta.cpp"
    big.write_text(text)
    lines = text.split("\n")
    assert len(lines) > 1000
    planted = next(n for n, line in enumerate(lines, 1) if "x.size(1)" in line)
    assert [(f.line, f.rule) for f in lint([big])] == [(planted, "size()")]


def test_escape_needs_a_reason(tmp_path: Path):
    """As in vllm-ascend's scan: a bare marker exempts nothing, it must say why."""
    source = (LINT / "one_line_block.cpp").read_text()
    bare = tmp_path / "bare.cpp"
    bare.write_text(source.replace("x.size(0)});", f"x.size(0)}});  // {ESCAPE}"))
    reasoned = tmp_path / "reasoned.cpp"
    reasoned.write_text(source.replace("x.size(0)});", f"x.size(0)}});  // {ESCAPE} static"))
    assert [f.line for f in lint([bare])] == [6]
    assert lint([reasoned]) == []


# vllm-ascend's tools/check_symbolic_meta.py, restated: a line is flagged when it holds one
# of these substrings, unless it or the line above carries the escape marker and a reason.
# It scans whole files; aclcap's lint must flag at least its lines inside meta impls, but for
# `empty_symint({`: ATen's empty_symint has no int64_t overload for a braced list to pick.
ASCEND_PATTERNS = (
    ".size(", ".sizes(", ".numel(", "at::empty({", "torch::empty({", "at::zeros({",
    "torch::zeros({", "std::vector<int64_t>", "at::SmallVector<int64_t",
    "c10::SmallVector<int64_t")
_NOT_CODE = re.compile(r'"(?:\\.|[^"\\])*"|//.*')


def ascend_scan(path: Path) -> set[int]:
    """The lines the scan flags, its patterns applied to each line's code: comments and
    string literals are blanked first, since text there is no use of a size."""
    lines = path.read_text().split("\n")
    flagged = set()
    for number, line in enumerate(lines, start=1):
        escaped = any(ESCAPE in text and text.split(ESCAPE, 1)[1].strip()
                      for text in lines[max(number - 2, 0):number])
        code = _NOT_CODE.sub("", line)
        if not escaped and any(pattern in code for pattern in ASCEND_PATTERNS):
            flagged.add(number)
    return flagged


# Fixture -> the lines (first, last) its meta impls span.
META_SPANS = {
    ASCEND: (10, 51),
    FIXTURES / "badops.cpp": (28, 30),
    LINT / "one_line_block.cpp": (5, 7),
    LINT / "multi_line_block.cpp": (5, 18),
    LINT / "expand_qualified.cpp": (12, 19),
    LINT / "lib_name.cpp": (5, 6),
    LINT / "torch_fn.cpp": (5, 12),
    LINT / "lambda.cpp": (9, 12),
    LINT / "dispatch_key.cpp": (5, 7),
}


@pytest.mark.parametrize("path", META_SPANS, ids=lambda p: p.name)
def test_finds_all_that_vllm_ascend_scan_finds_in_meta_impls(path: Path):
    first, last = META_SPANS[path]
    ours = {f.line for f in lint([path])}
    assert ours <= set(range(first, last + 1)), "reported outside the meta impls"
    assert {n for n in ascend_scan(path) if first <= n <= last} <= ours


def test_vllm_ascend_style_meta_file():
    """On a meta file in vllm-ascend's layout, the scan's lines in the meta impls are all
    found, and one more it misses (`probs->size(1)`); the NPU kernel beside them, which the
    whole-file scan flags, is left alone, and so is `at::empty_symint({sym, int})`, which
    the scan's own `empty_symint({` pattern would flag."""
    ours = {f.line for f in lint([ASCEND])}
    scan = ascend_scan(ASCEND)
    assert ours - scan == {44}
    assert scan - ours == {57}
    assert "at::empty_symint({logits.sym_size(0), top_k}" in ASCEND.read_text().split("\n")[44]
    assert 45 not in ours
    assert {f.rule for f in lint([ASCEND]) if f.line == 14} == {"size()"}  # helper of 2


def test_cli_exit_1_with_findings_and_json():
    run = aclcap("check-meta", "--lint", str(LINT), "--json", "-")
    assert run.code == 1
    rows = run.json()["results"]
    assert {r["rule"] for r in rows} == {
        "size()", "sizes()", "numel()", "at::empty({...})", "empty_symint({...})",
        "std::vector<int64_t>", "SmallVector<int64_t>", "int(size)", ".item()", ".tolist()"}
    assert all({"file", "line", "rule", "code", "hint"} <= set(r) for r in rows)


def test_missing_path_is_an_error():
    with pytest.raises(FileNotFoundError, match="no/such/dir: no such file or folder"):
        lint([Path("no/such/dir")])


def test_missing_tree_sitter_is_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "tree_sitter_cpp", None)
    spec = importlib.util.spec_from_file_location("lint_without_parser", lint_module.__file__)
    assert spec is not None and spec.loader is not None
    with pytest.raises(ImportError, match="pip install tree-sitter tree-sitter-cpp"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_python_file_that_does_not_parse_is_bad_input(tmp_path: Path):
    """A fake in a file the lint cannot parse is not lint-clean: exit 2 naming the line."""
    broken = tmp_path / "fakes.py"
    broken.write_text("import torch\n\n\n@torch.library.register_fake('ns::op')\n"
                      "def _(x):\n    return x.new_empty(int(x.shape[0]))\n\n"
                      "def helper(:\n    pass\n")
    run = aclcap("check-meta", "--lint", str(broken))
    assert run.code == 2, run.stdout
    (line,) = run.stderr.strip().splitlines()
    assert f"{broken}:8:" in line and "cannot parse" in line and "concrete-size" not in line
