"""stubs: exact stubs where the schema decides, guesses with a named TODO elsewhere."""

from __future__ import annotations

import torch

from aclcap.meta.registry import list_ops
from aclcap.meta.stubs import stub_source

_lib = torch.library.Library("aclcap_stubtest", "DEF")
_lib.define("inplace(Tensor(a!) x, float alpha) -> ()")
_lib.define("aliased(Tensor(a!) out, Tensor x) -> Tensor(a!)")
_lib.define("pair(Tensor x, *, int dim=0) -> (Tensor, Tensor)")
_lib.define("count(Tensor x) -> int")


def _stubs() -> dict[str, str]:
    return {o.qualname.split("::")[1]: stub_source(o) for o in list_ops(["aclcap_stubtest"])}


def test_returning_nothing_is_exact():
    src = _stubs()["inplace.default"]
    assert "def _fake_inplace_default(x, alpha):" in src
    assert "return None  # exact" in src and "TODO" not in src


def test_aliased_output_returns_that_input():
    src = _stubs()["aliased.default"]
    assert "return out\n" in src and "TODO" not in src


def test_guessed_outputs_are_named_and_kwarg_only_kept():
    src = _stubs()["pair.default"]
    assert "def _fake_pair_default(x, *, dim):" in src
    assert "TODO: output 0 is guessed as empty_like(x)" in src
    assert "TODO: output 1 is guessed" in src
    assert "return (torch.empty_like(x), torch.empty_like(x))" in src


def test_non_tensor_output_raises_with_todo():
    src = _stubs()["count.default"]
    assert 'raise NotImplementedError("TODO: output 0")' in src


def test_stub_source_is_valid_python():
    for src in _stubs().values():
        compile(src, "<stub>", "exec")
