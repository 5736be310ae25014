"""A worker crash names the check it happened in: a C++ composite whose body crashes on fake
tensors fails with its registration site and the fix; a kernel crashing on real inputs stays
crashed."""

from __future__ import annotations

import torch

from aclcap.meta.checks import CHECKS, check_op
from aclcap.meta.crashes import FAKE_CHECKS, KERNEL_STEP, crash_outcome
from aclcap.meta.messages import CheckStart, event_line, parse_event
from aclcap.meta.registry import MetaKind
from aclcap.meta.sample_inputs import SampleInput
from aclcap.status import Status
from tests.conftest import ROOT, aclcap

BADOPS = ROOT / "tests" / "fixtures" / "badops.py"
SITE = "C++ composite (/src/ops.cpp:12): CompositeImplicitAutograd"


def test_check_start_round_trips_the_pipe():
    event = CheckStart("ns::op.default", "fake_vs_real")
    assert parse_event(event_line(event)) == event


def test_fake_checks_are_registered_checks():
    assert FAKE_CHECKS <= set(CHECKS)


def test_check_op_announces_each_step_before_it_runs():
    heard: list[str] = []
    sample = SampleInput((torch.randn(2, 3), torch.randn(2, 3)))
    check_op("aten::add.Tensor", [sample], ("writes", "unused_marks"), on_check=heard.append)
    assert heard == [KERNEL_STEP, "writes", "unused_marks"]


def test_composite_crash_on_fake_tensors_is_a_fail_with_site_and_fix():
    status, findings = crash_outcome("ns::op.default", MetaKind.COMPOSITE_CPP, SITE,
                                     "fake_vs_real", "crashed (signal 11: SIGSEGV)")
    assert status is Status.FAIL
    assert findings[0].message.startswith("C++ composite (/src/ops.cpp:12) fails on fake "
                                          "tensors")
    assert "its C++ body crashed (SIGSEGV) on fake tensors" in findings[0].message
    assert 'm.impl("op", torch::kCPU, &fn)' in findings[0].message


def test_kernel_crash_stays_crashed_and_names_the_step():
    for kind in (MetaKind.COMPOSITE_CPP, MetaKind.PYTHON):
        status, findings = crash_outcome("ns::op.default", kind, SITE, KERNEL_STEP,
                                         "crashed (signal 11: SIGSEGV)")
        assert status is Status.CRASHED
        assert findings[0].message == ("crashed (signal 11: SIGSEGV) while the kernel ran on "
                                       "real inputs")
    status, findings = crash_outcome("ns::op.default", MetaKind.PYTHON, SITE,
                                     "fullgraph_compile", "crashed (signal 6: SIGABRT)")
    assert status is Status.CRASHED and findings[0].message.endswith("in check fullgraph_compile")


def test_crashing_composite_and_kernel_through_the_worker():
    """badops.cpp's raw_first reads its input's bytes: real tensors pass, its body segfaults
    on fake ones; segfault's kernel segfaults on real inputs."""
    run = aclcap("check-meta", "--lib", str(BADOPS), "--namespace", "aclcap_crash",
                 "--timeout", "5", "--json", "-")
    assert run.code == 1
    rows = {r["op"]: r for r in run.json()["results"]}
    composite = rows["aclcap_crash::raw_first.default"]
    assert composite["status"] == "fail"
    reason = composite["reasons"][0]
    assert "badops.cpp:" in reason and "fails on fake tensors" in reason
    assert "its C++ body crashed (SIGSEGV) on fake tensors" in reason
    assert "custom_op whose body calls torch.ops.aclcap_crash.raw_first" in reason
    assert 'register the forward on its backend keys (m.impl("raw_first", torch::kCPU, &fn))' \
        in reason
    kernel = rows["aclcap_crash::segfault.default"]
    assert kernel["status"] == "crashed"
    assert kernel["reasons"] == ["crashed (signal 11: SIGSEGV) while the kernel ran on real "
                                 "inputs"]
