"""check-meta's verdicts on a library registered as large real ones are
(tests/fixtures/verdicts.cpp and .py): a C++ Autograd kernel is judged as the C++ body that
tracing runs, an op with no kernel for the device is not a missing meta, every backend key
with a kernel is listed, and a fake registered through a helper is named by its own line."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, aclcap

VERDICTS = ROOT / "tests" / "fixtures" / "verdicts.py"
CPP = VERDICTS.with_suffix(".cpp")


def line_of(path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().split("\n"), 1) if text in line)


@pytest.fixture(scope="module")
def rows():
    run = aclcap("check-meta", "--lib", str(VERDICTS), "--namespace", "aclcap_verdict",
                 "--json", "-")
    return {r["op"].split("::")[1]: r for r in run.json()["results"]}, run


def test_autograd_kernel_calling_forward_ops_with_metas_passes(rows):
    row = rows[0]["scaled.default"]
    assert row["kernels"] == ["CPU"]
    site = f"verdicts.cpp:{line_of(CPP, 'TORCH_LIBRARY_IMPL(aclcap_verdict, Autograd')}"
    assert row["meta_source"].startswith("C++ Autograd kernel (") and site in row["meta_source"]
    assert row["status"] == "pass", row["reasons"]
    assert row["sample_count"] == 4  # two per dtype


def test_autograd_kernel_failing_on_fake_tensors_names_its_body(rows):
    row = rows[0]["peek.default"]
    assert row["status"] == "fail"
    site = f"verdicts.cpp:{line_of(CPP, 'TORCH_LIBRARY_IMPL(aclcap_verdict, Autograd')}"
    assert site in row["reasons"][0] and "fails on fake tensors" in row["reasons"][0]
    assert "keep data reads out of it" in row["reasons"][0]


def test_autograd_kernel_without_samples_is_its_own_verdict(rows):
    row = rows[0]["shifted.default"]
    assert row["status"] == "unverified"
    assert row["reasons"] == [
        "C++ Autograd kernel, not exercised: torch.compile runs its C++ body on fake tensors "
        "(the ops it calls need metas, it must not read data); give it samples "
        "(@aclcap.samples) to check it"]
    assert "1 unverified C++ Autograd kernel(s)" in rows[1].stderr.replace("\n", " ")


def test_every_backend_key_with_a_kernel_is_listed(rows):
    assert rows[0]["quant_only.default"]["kernels"] == ["QuantizedCPU"]


def test_fake_registered_through_a_helper_is_named_by_its_own_line(rows):
    row = rows[0]["via_helper.default"]
    assert row["status"] == "pass", row["reasons"]
    line = line_of(VERDICTS, "def _via_helper_fake(") - 1  # its decorator's line
    assert row["meta_source"] == f"register_fake ({VERDICTS}:{line})"


def test_op_with_no_kernel_for_the_device_is_not_a_missing_meta():
    """A CUDA-only op in a CPU build, or one with no kernel at all: nothing to trace here,
    so its own status, not counted as a failure unless --strict."""
    run = aclcap("check-meta", "--lib", str(VERDICTS), "--namespace", "aclcap_nokernel",
                 "--json", "-")
    assert run.code == 0, run.stderr
    got = {r["op"]: r for r in run.json()["results"]}
    assert {op: r["status"] for op, r in got.items()} == {
        "aclcap_nokernel::cuda_only.default": "no_kernel",
        "aclcap_nokernel::no_kernel.default": "no_kernel"}
    assert got["aclcap_nokernel::cuda_only.default"]["kernels"] == ["CUDA"]
    assert got["aclcap_nokernel::cuda_only.default"]["reasons"] == [
        "no kernel for cpu in this build: nothing runs or traces it here, so its meta is "
        "checked where it has a kernel (it has no meta impl either)"]
    assert run.json()["summary"]["no_kernel"] == 2
    assert "2 with no kernel for cpu" in run.stderr.replace("\n", " ")
    strict = aclcap("check-meta", "--lib", str(VERDICTS), "--namespace", "aclcap_nokernel",
                    "--strict")
    assert strict.code == 1
