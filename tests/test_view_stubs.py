"""Stubs for ops that return a view of an input (`Tensor(a)`): `x.view(...)` with the shape
read off the samples, kept only when aclcap's fake-vs-real comparison passes on every
sample; a TODO otherwise. Never `return x`, which is wrong for any view of another shape."""

from __future__ import annotations

import torch

from aclcap.meta.registry import list_ops
from aclcap.meta.sample_inputs import SampleInput
from aclcap.meta.stubs import stub_source

_lib = torch.library.Library("aclcap_viewstub", "DEF")
_lib.define("flat(Tensor(a) x) -> Tensor(a)")
_lib.define("rows(Tensor(a) x) -> Tensor(a)")
_lib.define("half(Tensor(a) x) -> Tensor(a)")
_lib.impl("flat", lambda x: x.view(-1), "CPU")
_lib.impl("rows", lambda x: x.view(x.shape[0], 2, -1), "CPU")
_lib.impl("half", lambda x: x[:, : x.shape[1] // 2], "CPU")  # a slice: no view() gives it


def _calls(name: str, *shapes: tuple[int, ...]) -> list:
    op = getattr(torch.ops.aclcap_viewstub, name).default
    samples = [SampleInput((torch.randn(*s),), {}) for s in shapes]
    return [(s, op(*s.args)) for s in samples]


def _op(name: str):
    return next(o for o in list_ops(["aclcap_viewstub"]) if o.qualname.endswith(f"::{name}"
                                                                                  ".default"))


def test_flat_view_is_read_from_the_samples():
    src = stub_source(_op("flat"), _calls("flat", (3, 8), (5, 4)))
    assert "return x.view(-1)\n" in src and "TODO" not in src


def test_view_keeps_symbolic_dims():
    src = stub_source(_op("rows"), _calls("rows", (3, 8), (5, 6)))
    assert "return x.view(x.shape[0], 2, -1)\n" in src and "TODO" not in src


def test_view_no_candidate_matches_keeps_a_todo():
    src = stub_source(_op("half"), _calls("half", (3, 8), (4, 6)))
    assert "TODO: output 0 is a view of x" in src and "none of x.view(...) matched" in src
    assert "return x\n" not in src


def test_view_without_samples_keeps_a_todo():
    from aclcap.meta.stubs import sample_calls

    src = stub_source(_op("flat"))
    assert "TODO: output 0 is a view of x" in src and "no samples" in src
    assert sample_calls(_op("flat")) == []  # no @aclcap.samples for it
    compile(src, "<stub>", "exec")


def test_emit_stubs_reads_the_view_from_declared_samples(tmp_path):
    from tests.conftest import aclcap

    lib = tmp_path / "viewlib.py"
    lib.write_text(
        "import torch\nimport aclcap\n"
        "_lib = torch.library.Library('aclcap_viewemit', 'DEF')\n"
        "_lib.define('flat(Tensor(a) x) -> Tensor(a)')\n"
        "_lib.impl('flat', lambda x: x.view(-1), 'CPU')\n"
        "@aclcap.samples('aclcap_viewemit::flat')\n"
        "def _(device, dtype):\n"
        "    yield aclcap.SampleInput((torch.randn(3, 8, device=device, dtype=dtype),), {})\n"
        "    yield aclcap.SampleInput((torch.randn(2, 5, device=device, dtype=dtype),), {})\n")
    stubs = tmp_path / "stubs.py"
    run = aclcap("check-meta", "--lib", str(lib), "--emit-stubs", str(stubs))
    assert run.code == 1, run.stderr  # the op has no meta impl
    src = stubs.read_text()
    assert "    return x.view(-1)\n" in src and "TODO" not in src.split("def _fake_flat")[1]
