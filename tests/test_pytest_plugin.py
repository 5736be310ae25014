"""The pytest plugin on the planted-defect library (one item per op, failing, skipped or
passing as check-meta judges it; a segfault is one failed item) and aclcap.testing.check_op.

The shared dev venv installs aclcap editable from another checkout, so the `pytest11` entry
point of this pyproject may not be registered: the plugin is loaded with `-p` when it is
not."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
import torch

from aclcap import SampleInput
from aclcap.testing import check_op
from tests.conftest import ROOT

pytest_plugins = ("pytester",)

BADOPS = ROOT / "tests" / "fixtures" / "badops.py"
PLUGIN = "aclcap.pytest_plugin"


def _plugin_args() -> list[str]:
    registered = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", PLUGIN]


def test_plugin_items_per_op(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess(
        *_plugin_args(), "--aclcap-lib", str(BADOPS), "--aclcap-namespace", "aclcap_test",
        "--aclcap-namespace", "aclcap_crash", "--aclcap-timeout", "5", "-rA",
        "--rootdir", str(pytester.path), "-p", "no:cacheprovider")
    # aclcap_test: 5 failing (2 missing, 3 with defects), 1 without samples, 4 good;
    # aclcap_crash: the segfault, the hang and the composite crashing on fake tensors fail.
    result.assert_outcomes(passed=4, failed=8, skipped=1)
    out = result.stdout.str()
    assert "FAILED aclcap::test_meta[aclcap_crash::segfault.default]" in out
    assert "crashed (signal 11: SIGSEGV) while the kernel ran on real inputs" in out
    assert "FAILED aclcap::test_meta[aclcap_test::wrong_shape.default]" in out
    assert "PASSED aclcap::test_meta[aclcap_test::good.default]" in out
    assert "SKIPPED" in out and "not_exercised" in out


def test_plugin_bad_namespace_is_a_usage_error(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess(
        *_plugin_args(), "--aclcap-lib", str(BADOPS), "--aclcap-namespace", "no_such_ns",
        "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "aclcap: --namespace no_such_ns" in result.stderr.str()


def test_check_op_passes_and_raises():
    sample = SampleInput((torch.randn(3, 4), torch.randn(3, 4)))
    check_op("aten::add.Tensor", [sample], ("writes", "fake_vs_real", "unused_marks"))
    lib = torch.library.Library("aclcap_testing_api", "DEF")
    lib.define("halve(Tensor x) -> Tensor")
    lib.impl("halve", lambda x: x[..., : x.shape[-1] // 2].clone(), "CPU")
    torch.library.register_fake("aclcap_testing_api::halve", lambda x: torch.empty_like(x),
                                lib=lib)
    with pytest.raises(AssertionError,
                       match=r"aclcap_testing_api::halve.default: fake impl output 0"):
        check_op("aclcap_testing_api::halve.default", [SampleInput((torch.randn(3, 8),))],
                 ("fake_vs_real",))
