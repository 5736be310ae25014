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


def test_plugin_answers_unchanged_ops_from_the_result_cache_unless_told_not_to(
        pytester: pytest.Pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("ACLCAP_CACHE_DIR", str(tmp_path / "cache"))

    def run(*extra: str) -> tuple[dict, str]:
        result = pytester.runpytest_subprocess(
            *_plugin_args(), "--aclcap-lib", str(BADOPS), "--aclcap-namespace", "aclcap_test",
            "-p", "no:cacheprovider", *extra)
        line = next(ln for ln in result.outlines if ln.startswith("aclcap: "))
        return result.parseoutcomes(), line

    first, fresh = run()
    again, cached = run()
    afresh, forced = run("--aclcap-no-cache")
    assert first == again == afresh  # the same verdicts, whichever answered
    assert fresh.startswith("aclcap: 0 of 10 ops") and forced.startswith("aclcap: 0 of 10 ops")
    # every exercised op (checked by the worker, not missing or without samples) is cached
    assert cached.startswith("aclcap: 7 of 10 ops from check-meta's result cache"), cached


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


def test_check_op_takes_the_default_overload_by_its_short_name():
    """`ns::op` (the form @aclcap.samples accepts) is the default overload."""
    lib = torch.library.Library("aclcap_testing_short", "DEF")
    lib.define("double(Tensor x) -> Tensor")
    lib.impl("double", lambda x: x * 2, "CPU")
    torch.library.register_fake("aclcap_testing_short::double", lambda x: torch.empty_like(x),
                                lib=lib)
    check_op("aclcap_testing_short::double", [SampleInput((torch.randn(3, 8),))],
             ("fake_vs_real",))


def test_check_op_refuses_a_packet_naming_its_overloads():
    """Issue 50: `check_op(torch.ops.ns.op, ...)` raised torch's `AttributeError ... '_schema'`."""
    with pytest.raises(TypeError, match=r"check_op\(aten::add\): pass one overload, not the "
                                        r"packet: .*torch\.ops\.aten\.add\.Tensor"):
        check_op(torch.ops.aten.add, [SampleInput((torch.randn(2), torch.randn(2)))])


def test_check_op_without_samples_fails():
    with pytest.raises(AssertionError, match=r"aten::add.Tensor: no samples given"):
        check_op("aten::add.Tensor", [])


def test_failing_check_op_logs_nothing_from_torch_trace(caplog: pytest.LogCaptureFixture):
    """torch's structured-trace logger (tlparse's) would fill "Captured log call" with
    dozens of empty DEBUG lines under the failure."""
    lib = torch.library.Library("aclcap_testing_quiet", "DEF")
    lib.define("halve(Tensor x) -> Tensor")
    lib.impl("halve", lambda x: x[..., : x.shape[-1] // 2].clone(), "CPU")
    torch.library.register_fake("aclcap_testing_quiet::halve", lambda x: torch.empty_like(x),
                                lib=lib)
    with pytest.raises(AssertionError, match="fake impl output 0"):
        check_op("aclcap_testing_quiet::halve", [SampleInput((torch.randn(3, 8),))])
    assert [r.name for r in caplog.records if r.name.startswith("torch.__trace")] == []


def test_plugin_skip_names_the_op_and_the_plugin_option(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess(
        *_plugin_args(), "--aclcap-lib", str(BADOPS), "--aclcap-namespace", "aclcap_test",
        "-k", "no_samples", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    (line,) = [x for x in result.outlines if x.startswith("SKIPPED")]
    assert "pytest_plugin.py" not in line
    assert "aclcap_test::no_samples.default not_exercised: no sample inputs" in line
    assert "--aclcap-samples-from MODEL.py" in line and "--samples-from" not in \
        line.replace("--aclcap-samples-from", "")


def test_plugin_reads_its_ini_keys_and_the_command_line_overrides(pytester: pytest.Pytester):
    """`aclcap_lib` / `aclcap_namespace` / ... in pytest.ini (or [tool.pytest.ini_options])
    as for any plugin; a flag given on the command line wins."""
    pytester.makeini(f"[pytest]\naclcap_lib = {BADOPS}\naclcap_namespace =\n"
                     "    no_such_ns\n    nor_this_one\naclcap_timeout = 5\n")
    from_ini = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider")
    assert from_ini.ret == pytest.ExitCode.USAGE_ERROR  # the library loaded, both read
    assert "aclcap: --namespace no_such_ns, nor_this_one: no op is registered there; " \
        "namespaces with custom ops: aclcap_crash, aclcap_test" in from_ini.stderr.str()
    overridden = pytester.runpytest_subprocess(
        *_plugin_args(), "--aclcap-namespace", "aclcap_test", "-k", "good",
        "-p", "no:cacheprovider")
    overridden.assert_outcomes(passed=1)


_nan_lib = torch.library.Library("aclcap_nantest", "DEF")
_nan_lib.define("dequant(Tensor packed) -> Tensor")
# A dequantize of bytes whose scale reads as NaN (fbgemm's n-bit rows on random bytes):
# the kernel's output holds NaN, and its fake is right.
_nan_lib.impl("dequant", lambda packed: torch.where(packed > 127, float("nan"),
                                                    packed.float()), "CPU")
torch.library.register_fake("aclcap_nantest::dequant")(
    lambda packed: packed.new_empty(packed.shape, dtype=torch.float32))


def test_a_right_fake_of_a_kernel_that_outputs_nan_passes():
    """opcheck's AOT test compares outputs with assert_close, where NaN differs from NaN:
    every fake failed on a call whose outputs hold NaN, so it runs where none do."""
    bytes_ = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    check_op("aclcap_nantest::dequant", [SampleInput((bytes_,)),
                                          SampleInput((bytes_[:4] // 2,))])
    check_op("aclcap_nantest::dequant", [SampleInput((bytes_,))])  # NaN in every call
