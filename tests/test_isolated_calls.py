"""Issue 49 item 1: torch-cluster's `fps` crashed some of its varied calls in one run and
others in the next (a call that wrote past what it allocated corrupted the worker's heap,
and a later call there aborted), so the same command wrote other notes from run to run. A
kernel that crashed a worker is observed again with each call in a child of its own: what
one call corrupts, no later call sees, and each crash is that call's."""

from __future__ import annotations

import os

import torch

from aclcap._isolated import ChildDied, run_forked
from aclcap.meta.sample_inputs import SampleInput
from aclcap.meta.synthesize.observation import Source, observe_op

_lib = torch.library.Library("isolatetest", "DEF")
_lib.define("leaky(Tensor x) -> Tensor")
_lib.define("dies_past(Tensor x, int n) -> Tensor")
_STATE = {"poisoned": False}


def _leaky(x: torch.Tensor) -> torch.Tensor:
    """A call with more than 4 rows leaves the process changed (as a write past what a
    kernel allocated leaves the heap): every later call's output has a row more."""
    out = x.new_zeros(1 + _STATE["poisoned"], x.shape[-1])
    _STATE["poisoned"] |= x.shape[0] > 4
    return out


def _dies_past(x: torch.Tensor, n: int) -> torch.Tensor:
    if x.shape[0] > 4:
        os.abort()  # as an unchecked kernel dies on a size its samples never had
    return x * n


_lib.impl("leaky", _leaky, "CPU")
_lib.impl("dies_past", _dies_past, "CPU")


def test_a_forked_call_returns_its_value_and_a_crash_is_named():
    assert run_forked(lambda: 6 * 7) == 42
    try:
        run_forked(os.abort)
    except ChildDied as died:
        assert str(died) == "crashed (signal 6: SIGABRT)"
    else:
        raise AssertionError("the child's abort was not seen")


def test_isolated_calls_see_nothing_an_earlier_call_changed():
    op = torch.ops.isolatetest.leaky.default
    sample = [Source(SampleInput((torch.randn(3, 4),)))]
    _STATE["poisoned"] = False
    together = observe_op(op, sample)
    assert {c.outputs[0].shape[0] for c in together.calls} == {1, 2}  # history leaks in
    _STATE["poisoned"] = False
    alone = observe_op(op, sample, isolate=True)
    assert {c.outputs[0].shape[0] for c in alone.calls} == {1}
    assert not _STATE["poisoned"]  # and the observing process is left as it was


def test_an_isolated_crash_costs_that_call_and_the_process_goes_on():
    op = torch.ops.isolatetest.dies_past.default
    seen = observe_op(op, [Source(SampleInput((torch.randn(3, 4), 2)))], isolate=True)
    assert seen.crashed and all(how == "crashed (signal 6: SIGABRT)" for _, how in seen.crashed)
    assert all("x dim 0" in what for what, _ in seen.crashed), seen.crashed
    assert seen.calls and seen.to_dict()["crashed"] == seen.crashed
