"""Issue 49: a kernel that checks no index wrote past its input's end (torch-scatter run
along a dim its index overruns); the heap of the worker was corrupted, and later calls there
crashed or read as written (`scatter_max` "writes `src`"), so the same command gave other
verdicts from run to run. A call's copies now lie in front of a guard band that names such a
call, and keep their layout: torch.clone made a strided slice dense, so the "strided rows"
variation never reached the kernel."""

from __future__ import annotations

import ctypes
from functools import partial

import pytest
import torch

from aclcap._isolated import ChildDied, run_forked
from aclcap.meta.fence import fenced
from aclcap.meta.guarded import Guards
from aclcap.meta.observe import observe
from aclcap.meta.sample_inputs import SampleInput
from aclcap.meta.synthesize.faults import (
    ALLOCATED,
    OVERRUN,
    FaultyCall,
    kernel_finding,
    observe_twice,
)

_lib = torch.library.Library("guardtest", "DEF")
_lib.define("past_end(Tensor x, int n) -> Tensor")
_lib.define("strides_of(Tensor x) -> Tensor")
_lib.define("read_past_end(Tensor x, int n) -> Tensor")


def _past_end(x: torch.Tensor, n: int) -> torch.Tensor:
    """Writes `n` elements past the end of `x`, as a kernel without bounds checks would
    (through its storage: torch refuses that past the storage's own end)."""
    if n:
        x.as_strided((n,), (1,), x.storage_offset() + x.numel()).zero_()
    return x + 1


def _strides_of(x: torch.Tensor) -> torch.Tensor:
    return torch.tensor(x.stride())


def _read_past_end(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.as_strided((x.numel() + n,), (1,), x.storage_offset()).clone()


_lib.impl("past_end", _past_end, "CPU")
_lib.impl("strides_of", _strides_of, "CPU")
_lib.impl("read_past_end", _read_past_end, "CPU")


def test_copies_keep_strides_offsets_and_values():
    guards = Guards()
    wide = torch.randn(6, 32)
    for t in (wide[:, :16], wide.t(), torch.arange(10.0)[3:7], torch.randn(1, 4).expand(3, 4)):
        copy = guards.copy(t)
        assert (copy.stride(), copy.storage_offset()) == (t.stride(), t.storage_offset())
        assert torch.equal(copy, t) and copy.untyped_storage().data_ptr() != \
            t.untyped_storage().data_ptr()
    assert guards.overrun([]) is None


def test_a_write_past_an_inputs_end_is_named_not_observed():
    op = torch.ops.guardtest.past_end.default
    clean = observe(op, (torch.randn(4, 8), 0))
    assert clean.overrun is None
    run, differs = observe_twice(op, SampleInput((torch.randn(4, 8), 3), {}))
    assert run.overrun == "x" and differs == f"{OVERRUN} `x`"
    line = kernel_finding([FaultyCall(run.call, "n: 0 -> 3", differs)], [clean.call],
                          "fitting")
    assert line.startswith("the kernel writes past the end of an input on n: 0 -> 3 (1 "
                           "call(s), e.g. it writes past the end of `x`): the kernel writes "
                           "memory it does not own"), line


def test_the_kernel_sees_the_layout_the_call_was_made_with():
    op = torch.ops.guardtest.strides_of.default
    rows = torch.randn(6, 32).narrow(-1, 0, 16)  # the "strided rows" variation's slice
    run = observe(op, (rows,))
    assert run.outputs.tolist() == [32, 1]
    assert run.call.args[0].tensor.strides == (32, 1)  # recorded as the kernel saw it
    assert run.sample.args[0].stride() == (32, 1)  # and kept so for a replay


def test_a_read_past_an_inputs_end_still_differs_between_two_runs():
    """The band is what such a read finds: each run fills it with another byte, as the
    heap's leftovers differed before there was a band."""
    op = torch.ops.guardtest.read_past_end.default
    assert observe_twice(op, SampleInput((torch.randn(4, 8), 0), {}))[1] == ""
    run, differs = observe_twice(op, SampleInput((torch.randn(4, 8), 2), {}))
    assert run.overrun is None and differs == "output 0's values differ"


def test_a_one_element_input_of_any_stride_is_observed():
    """A column of one row counts as contiguous with its stride of 16, and its bytes were
    read with view(uint8), which refuses that stride: fbgemm's segment_sum_csr, given a
    step's one-id column, stopped the whole synthesis at the harvest."""
    column = torch.randn(1, 16)[:, 3]
    assert column.is_contiguous() and column.stride() == (16,)
    recorded = observe(torch.ops.guardtest.past_end.default, (column, 0))
    assert recorded.call.written == () and recorded.overrun is None
    assert torch.equal(recorded.outputs, column + 1)


_lib.define("half_written(Tensor x) -> Tensor")


def _half_written(x: torch.Tensor) -> torch.Tensor:
    """Leaves the second half of its output unwritten, as fbgemm's
    expand_into_jagged_permute does when asked for more entries than its offsets hold."""
    out = torch.empty(x.shape[0] * 2, dtype=x.dtype)
    out[: x.shape[0]] = x
    return out


_lib.impl("half_written", _half_written, "CPU")


def test_an_output_left_unwritten_differs_between_the_two_runs_every_time():
    """Each run's allocations start filled with its own byte (glibc's M_PERTURB): two runs
    that reused one freed block read the same leftovers, and 3 calls in 20 passed as clean
    (in a test worker's heap, refilling freed blocks instead still let 1 in 20 pass)."""
    op = torch.ops.guardtest.half_written.default
    differs = [observe_twice(op, SampleInput((torch.zeros(64 + i),)))[1] for i in range(20)]
    assert differs == ["output 0's values differ"] * 20


_lib.define("past_own_end(Tensor x, int n) -> Tensor")


def _past_own_end(x: torch.Tensor, n: int) -> torch.Tensor:
    """Writes `n` elements past the end of the output it allocated, as fbgemm's
    permute_1D_sparse_data does given lengths beyond its permuted_lengths_sum."""
    out = x.clone()
    if n:
        ctypes.memset(out.data_ptr() + out.nbytes, 0, n * out.element_size())
    return out


_lib.impl("past_own_end", _past_own_end, "CPU")


def test_a_write_just_past_an_allocated_outputs_end_is_named_in_every_run():
    """Into the alignment's slack: the fence finds it when it goes off. On glibc's heap such
    a write corrupted what lay next, and the worker crashed later, or not, as the heap's
    layout fell (fbgemm's permute: 3 runs of 4)."""
    op = torch.ops.guardtest.past_own_end.default
    assert observe_twice(op, SampleInput((torch.randn(5), 0), {}))[1] == ""
    for _ in range(3):
        assert observe_twice(op, SampleInput((torch.randn(5), 3), {}))[1] == \
            f"{OVERRUN} {ALLOCATED}"


def test_a_write_further_past_faults_at_once():
    """A block of a whole page ends against an inaccessible one: the write itself faults,
    in a child forked for the call, as synthesis isolates a kernel that crashed."""
    op = torch.ops.guardtest.past_own_end.default
    assert run_forked(partial(observe_twice, op, SampleInput((torch.randn(1024), 0), {}))
                      )[1] == ""
    with pytest.raises(ChildDied, match="SIGSEGV"):
        run_forked(partial(observe_twice, op, SampleInput((torch.randn(1024), 1), {})))


def test_blocks_are_aligned_filled_and_torchs_allocator_is_back_once_the_fence_is_off():
    with fenced(0x3C) as fence:
        inside = torch.empty(3, dtype=torch.uint8)
        # oneDNN's raw_allocate wants a block's context to be its data (an internal assert)
        conv = torch.nn.functional.conv1d(torch.randn(2, 3, 16), torch.randn(4, 3, 3))
    assert fence.on and not fence.overran and conv.shape == (2, 4, 14)
    assert inside.data_ptr() % 64 == 0 and inside.tolist() == [0x3C] * 3
    del inside  # freed after the fence is off: its own deleter still unmaps it
    with fenced(0) as again:  # goes on only over torch's own allocator
        pass
    assert again.on and not again.overran


_lib.define("c_rand(Tensor x) -> Tensor")
_lib.impl("c_rand", lambda x: torch.full_like(x, float(ctypes.CDLL(None).rand())), "CPU")


def test_a_kernel_drawing_from_c_rand_gives_the_same_in_both_runs():
    """torch-cluster's fps and random_walk draw from C's rand(), whose state followed the
    ops the worker ran before: their two runs differed, a kernel finding in one command
    and not in the next. Each run now starts from one seed, as torch's generator does."""
    op = torch.ops.guardtest.c_rand.default
    assert [observe_twice(op, SampleInput((torch.zeros(3),), {}))[1] for _ in range(3)] == \
        [""] * 3
