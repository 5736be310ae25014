"""state_reads: the ops whose Python kernels read the state make_inputs sets (a forward
context), found in the code through the functions they call, never by running them."""

from __future__ import annotations

import torch

from aclcap.draw_state import StateChange
from aclcap.meta.registrations import recording
from aclcap.meta.state_reads import state_readers

_CONTEXT: dict | None = None  # set per step, as vLLM's forward context is


class _Holder:
    def __init__(self) -> None:
        self.seq_lens: list[int] = []


HOLDER = _Holder()


def _context() -> dict:
    return _CONTEXT or {}


def _attention_context(name: str) -> dict:
    return _context()[name]  # two calls below the kernel, as vLLM's attention reaches it


with recording():
    _LIB = torch.library.Library("aclcap_statereads", "DEF")
    _LIB.define("attend(Tensor x, str name) -> Tensor")
    _LIB.impl("attend", lambda x, name: x * _attention_context(name)["scale"], "CPU")
    _LIB.define("plain(Tensor x) -> Tensor")
    _LIB.impl("plain", lambda x: x * 2, "CPU")


@torch.library.custom_op("aclcap_statereads::by_lens", mutates_args=())
def by_lens(x: torch.Tensor) -> torch.Tensor:
    return x[: sum(HOLDER.seq_lens)].clone()


def test_ops_reading_the_state_are_named_with_what_they_read_and_others_are_not():
    state = [StateChange(globals(), "_CONTEXT", {}, "tests.test_state_reads._CONTEXT"),
             StateChange(HOLDER, "seq_lens", [1], "HOLDER.seq_lens")]
    ops = ["aclcap_statereads::attend", "aclcap_statereads::plain",
           "aclcap_statereads::by_lens"]
    assert state_readers(ops, state) == {
        "aclcap_statereads::attend": "tests.test_state_reads._CONTEXT",
        "aclcap_statereads::by_lens": "HOLDER.seq_lens"}
    assert state_readers(ops, []) == {}
