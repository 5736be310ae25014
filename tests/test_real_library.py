"""check-meta and capture on a library registered the ways real ones are
(tests/fixtures/reallib.cpp): C++ composites from `m.def(schema, &fn)`, a Python Meta-key
impl, a no-tensor op, a mutating op returning (), a fake wrong at one size only."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, aclcap, aclcap_process

REALLIB = str(ROOT / "tests" / "fixtures" / "reallib.py")


@pytest.fixture(scope="module")
def rows():
    run = aclcap("check-meta", "--lib", REALLIB, "--json", "-")
    assert run.code == 1, run.stderr
    return {r["op"].split("::")[1]: r for r in run.json()["results"]}, run


def test_data_reading_cpp_composite_fails_with_site_and_fix(rows):
    row = rows[0]["slot_mapping.default"]
    assert row["status"] == "fail"
    assert row["meta_source"].startswith("C++ composite (") and "reallib.cpp:" in \
        row["meta_source"]
    reason = row["reasons"][0]
    assert "fails on fake tensors, as torch.compile runs it" in reason
    assert "reallib.cpp:" in reason and 'm.impl("slot_mapping", torch::kCPU, &fn)' in reason


def test_genuine_cpp_composite_passes(rows):
    row = rows[0]["scale_shift.default"]
    assert row["status"] == "pass" and row["meta_source"].startswith("C++ composite")


def test_no_tensor_op_is_not_missing(rows):
    row = rows[0]["has_isa.default"]
    assert row["status"] == "pass" and row["meta_source"].startswith("none needed")


def test_python_meta_key_impl_is_labelled_python(rows):
    row = rows[0]["row_sum.default"]
    assert row["status"] == "pass"
    assert row["meta_source"].startswith("Python kernel on the Meta key (") and \
        "reallib.py:" in row["meta_source"]


def test_fake_wrong_at_five_rows_is_named(rows):
    row = rows[0]["double_rows.default"]
    assert row["status"] == "fail"
    assert "shape [4, 8]" in row["reasons"][0] and "shape [5, 8]" in row["reasons"][0]


def test_trivial_fake_op_without_samples_is_not_exercised(rows):
    row = rows[0]["fill_rows.default"]
    assert row["status"] == "not_exercised"
    assert row["meta_source"].startswith("none; torch generates a trivial fake")


def test_cpp_composite_without_samples_is_unverified_and_counted(tmp_path):
    lib = tmp_path / "nosamples.py"  # the library as most are: no samples at all
    lib.write_text("import torch\nfrom torch.utils.cpp_extension import load\n"
                   f"load('aclcap_reallib', sources=[{REALLIB[:-3] + '.cpp'!r}], "
                   f"build_directory={str(ROOT / 'build' / 'reallib')!r}, "
                   "is_python_module=False)\n")
    # Its own process: reallib.py's samples are registered in this one.
    run = aclcap_process("check-meta", "--lib", str(lib), "--namespace", "aclcap_real",
                         "--json", "-")
    statuses = {r["op"]: r["status"] for r in run.json()["results"]}
    assert statuses["aclcap_real::slot_mapping.default"] == "unverified"
    assert statuses["aclcap_real::scale_shift.default"] == "unverified"
    assert run.json()["summary"]["unverified"] == 2
    assert "2 unverified C++ composite(s)" in run.stderr


def test_unknown_namespace_is_bad_input_listing_known_ones():
    run = aclcap("check-meta", "--namespace", "nosuchns")
    assert run.code == 2
    (line,) = run.stderr.strip().splitlines()
    assert "--namespace nosuchns: no op is registered there" in line and "aclcap" in line


def test_capture_names_the_untraceable_op_and_line():
    run = aclcap("capture", str(ROOT / "tests" / "models" / "data_reading_op.py"),
                 "--device", "cpu", "--json", "-")
    assert run.code == 1
    assert "internal error" not in run.stderr
    error = run.json()["trace"]["error"]
    assert error["op"] == "aclcap_real::slot_mapping"
    assert error["file"].endswith("data_reading_op.py") and error["line"] == 17
    for row in run.json()["results"]:
        assert row["status"] == "fail"
        assert "aclcap_real::slot_mapping fails at data_reading_op.py:17" in row["reasons"][0]
        # the advice is a command to paste from where capture ran: the real namespace and
        # the model's path with its folders (issue 50), no placeholder
        assert row["reasons"][0].endswith("run `aclcap check-meta --namespace aclcap_real "
                                          "--samples-from tests/models/data_reading_op.py`")


def test_samples_harvested_from_a_model_step():
    run = aclcap("check-meta", "--samples-from", str(ROOT / "tests" / "models" /
                 "data_reading_op.py"), "--namespace", "aclcap_real", "--json", "-")
    assert run.code == 1
    rows = {r["op"]: r for r in run.json()["results"]}
    slot = rows["aclcap_real::slot_mapping.default"]
    assert slot["status"] == "fail"
    assert any(s.endswith("from data_reading_op.py:17") for s in slot["sample_sources"])
    assert rows["aclcap_real::has_isa.default"]["status"] == "pass"


def test_bundled_ops_harvested_from_tiny_llama():
    run = aclcap("check-meta", "--samples-from", str(ROOT / "examples" / "tiny_llama.py"),
                 "--shapes", "1,2", "--json", "-")
    assert run.code == 0, run.stderr
    for row in run.json()["results"]:
        assert row["status"] == "pass"
        if not row["op"].endswith(".out"):  # tiny_llama calls the functional forms only
            assert any("from tiny_llama.py:" in s for s in row["sample_sources"]), row


def test_samples_from_a_missing_model_is_bad_input():
    run = aclcap("check-meta", "--samples-from", "no/such/model.py")
    assert run.code == 2 and "--samples-from no/such/model.py: no such model file" in run.stderr


def test_whole_step_cross_check_names_the_size_a_fake_is_wrong_at():
    run = aclcap("capture", str(ROOT / "tests" / "models" / "size_dependent_fake.py"),
                 "--device", "cpu", "--json", "-")
    assert run.code == 1
    (wrong,) = run.json()["trace"]["custom_ops_wrong_meta"]
    assert wrong["op"] == "aclcap_real::double_rows"
    assert wrong["sizes_wrong"] == [5] and wrong["sizes_right"] == [2]
    assert "shape [4, 8]" in wrong["reason"] and "wrong at size 5; right at size 2" in \
        wrong["reason"]


def test_a_context_reading_op_is_checked_in_each_sample_s_own_context():
    """Samples harvested at sizes 1, 2 and 4 each run beside the context their draw set
    (issue 48: vLLM's attention read the last draw's metadata and crashed)."""
    run = aclcap("check-meta", "--samples-from", str(ROOT / "tests" / "models" /
                 "context_reading_op.py"), "--namespace", "ctxread", "--shapes", "1,2,4",
                 "--no-cache", "--json", "-")
    assert run.code == 0, run.stdout + run.stderr
    (row,) = run.json()["results"]
    assert row["status"] == "pass" and row["reasons"] == [], row
    assert any(s.startswith("3 from context_reading_op.py") for s in row["sample_sources"])
