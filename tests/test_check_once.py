"""check-meta's speed without dropping a check: one compiled graph per dynamic signature
of an op (not per sample), test_aot_dispatch_dynamic on the op's most general call, and
the slowest ops named (docs/check-meta.md)."""

from __future__ import annotations

import torch
from torch._dynamo.utils import counters

import aclcap_ops
from aclcap.meta.checks import OpCheck, check_compile, dynamic_signature, representatives
from aclcap.meta.observe import observe
from aclcap.meta.registry import MetaKind, resolve_overload
from aclcap.meta.runner import MetaReport, MetaResult
from aclcap.meta.sample_inputs import SampleInput
from aclcap.report.check_meta import durations_line
from aclcap.status import Status


def _rms_calls(sizes: list[int], dtypes: list[torch.dtype]) -> tuple:
    aclcap_ops.load()
    op = resolve_overload("aclcap::rms_norm.default")
    return op, [observe(op, (torch.randn(n, 64, dtype=dt), torch.randn(64, dtype=dt), 1e-6), {})
                for dt in dtypes for n in sizes]


def test_one_graph_per_dynamic_signature_not_per_sample():
    # sizes 1, 5, 33 in two dtypes: six samples, two signatures (the dtypes). Without
    # size-oblivious compiles size 1 gets a graph of its own: four graphs.
    op, runs = _rms_calls([1, 5, 33], [torch.float32, torch.bfloat16])
    check = OpCheck(op, MetaKind.PYTHON)
    counters.clear()
    check_compile(check, runs)
    assert check.out.findings == []
    assert counters["stats"]["unique_graphs"] == 2


def test_a_wrong_result_at_size_one_is_still_caught():
    # the size-1 call runs through the shared graph and is compared with eager like the rest
    op, runs = _rms_calls([1, 5], [torch.float32])
    runs[0].outputs.add_(1)  # what eager "gave" at size 1 no longer matches
    check = OpCheck(op, MetaKind.PYTHON)
    check_compile(check, runs)
    assert [f.message for f in check.out.findings] == [
        "torch.compile result 0 (outputs, then inputs) differs from eager"]


def test_representatives_put_the_most_general_call_of_each_signature_first():
    _, runs = _rms_calls([1, 5, 33], [torch.float32, torch.bfloat16])
    ordered = representatives(runs)
    assert [(r.sample.args[0].shape[0], r.sample.args[0].dtype) for r in ordered] == [
        (5, torch.float32), (33, torch.float32), (1, torch.float32),
        (5, torch.bfloat16), (33, torch.bfloat16), (1, torch.bfloat16)]
    a = SampleInput((torch.zeros(2, 3), 4, True), {})
    assert dynamic_signature(a) == dynamic_signature(SampleInput((torch.zeros(7, 1), 9, True), {}))
    assert dynamic_signature(a) != dynamic_signature(SampleInput((torch.zeros(2, 3), 4, False), {}))
    assert dynamic_signature(a) != dynamic_signature(SampleInput((torch.zeros(2), 4, True), {}))


def test_durations_line_names_the_slowest_ops_first():
    rows = [MetaResult(f"ns::op{i}.default", "", [], "", Status.PASS, check_s=s)
            for i, s in enumerate([0.5, 2.3, 0.0, 1.0])]
    line = durations_line(MetaReport(rows, ["ns"]), count=2)
    assert line == "slowest ops (of 3.8 s checking): ns::op1.default 2.3 s, ns::op3.default 1.0 s"
    assert durations_line(MetaReport(rows[2:3], ["ns"])) == ""
