"""What a user reads is right: the failing op named from the error, torch's cause and fix
kept, advice that fits the kind of failure, capture rows that name the model line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, aclcap

MODELS = ROOT / "tests" / "models"


def _capture(model: Path, tmp_path: Path) -> dict:
    out = tmp_path / "capture.json"
    run = aclcap("capture", str(model), "--device", "cpu", "--shapes", "2,4", "--json", str(out))
    assert run.code == 1, run.stderr
    import json

    return json.loads(out.read_text())


def test_failing_op_comes_from_the_error_not_the_line(tmp_path):
    doc = _capture(MODELS / "two_ops_one_line.py", tmp_path)
    error = doc["trace"]["error"]
    assert error["op"] == "aclcap_twoops::b" and error["line"] == 22
    assert "no fake impl registered for <CustomOpDef(aclcap_twoops::b)>" in error["reason"]


def test_view_op_reasons_keep_cause_and_fix(tmp_path):
    out = tmp_path / "meta.json"
    run = aclcap("check-meta", "--lib", str(MODELS / "view_op_lib.py"), "--json", str(out))
    assert run.code == 1
    import json

    (row,) = json.loads(out.read_text())["results"]
    compile_reason = next(r for r in row["reasons"] if r.startswith("torch.compile"))
    assert "BackendCompilerFailed" not in compile_reason  # the wrapper is unwrapped
    for reason in (compile_reason, next(r for r in row["reasons"] if "opcheck" in r)):
        assert "alias annotations" in reason and "add a .clone()" in reason, reason


def test_view_op_capture_row_names_the_model_line(tmp_path):
    doc = _capture(MODELS / "view_op.py", tmp_path)
    reason = doc["results"][0]["reasons"][0]
    assert "aclcap_viewop::flat at view_op.py:11" in reason and "add a .clone()" in reason


@pytest.mark.parametrize("kind", ["sum", "item", "tolist"])
def test_value_dependent_branch_gets_cond_advice(kind, tmp_path):
    doc = _capture(MODELS / f"value_branch_{kind}.py", tmp_path)
    reason = doc["results"][0]["reasons"][0]
    assert "branches on a tensor's values" in reason and "torch.cond" in reason, reason
    assert "separate runs" not in reason and "guards on its size" not in reason


def test_size_guard_keeps_guard_range_advice():
    from aclcap.errors import CaptureError
    from aclcap.graph.backends.aoti import _export_advice

    failure = CaptureError("torch.export failed: UserError: Constraints violated (t)!")
    advice = _export_advice(failure, None, MODELS / "size_branch.py")
    assert advice.endswith("capture the sizes on each side in separate runs")


def test_footer_sizes_are_the_json_ones(tmp_path):
    out = tmp_path / "capture.json"
    run = aclcap("capture", str(MODELS / "view_op.py"), "--device", "cpu", "--shapes", "2,4",
                 "--json", str(out))
    import json

    sizes = [c["size"] for c in json.loads(out.read_text())["trace"]["recompiles"]]
    assert sizes and f"compiles at sizes {sizes}:" in run.stdout


def test_model_folder_is_on_sys_path_while_imported():
    from aclcap.loading.model_file import load_model_file

    before = list(sys.path)
    spec = load_model_file(MODELS / "sibling" / "uses_sibling.py")
    assert spec.build_model(None, None).__class__.__name__ == "Double"
    assert sys.path == before


def test_long_messages_are_cut_in_the_middle_keeping_the_fix():
    from aclcap.errors import cut_middle, first_line, summary

    text = ("Found a bad thing in op x. " + "Background that explains a lot. " * 20
            + "Please add a .clone() before returning it. Otherwise, please file an issue.")
    short = summary(text, 160)
    assert short.startswith("Found a bad thing") and short.endswith("before returning it.")
    lazy = ("The tensor has no data. " + "Background that explains a lot. " * 20
            + "To fix this, wrap the kernel in an opaque custom op.\nIf you're on Caffe2, "
            "allocation is lazy.")
    assert summary(lazy, 160).endswith("wrap the kernel in an opaque custom op.")
    assert len(cut_middle("word " * 100, 60)) <= 60
    assert first_line(ValueError("\n\nfirst\nsecond")) == "ValueError: first second"
