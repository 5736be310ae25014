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


def test_op_library_folder_is_on_sys_path_while_imported(tmp_path):
    """A Python op library that imports a module beside it loads, as a model file does;
    one whose sibling is missing says the file failed to load, not that it was not found."""
    import torch

    from aclcap.errors import UsageError
    from aclcap.loading.libraries import load_library

    (tmp_path / "sib_kern.py").write_text("def double(x):\n    return x * 2\n")
    (tmp_path / "siblib.py").write_text(
        "import torch\nfrom sib_kern import double\n"
        "@torch.library.custom_op('siblib::double', mutates_args=())\n"
        "def op(x: torch.Tensor) -> torch.Tensor:\n    return double(x)\n")
    before = list(sys.path)
    load_library(str(tmp_path / "siblib.py"))
    assert torch.ops.siblib.double(torch.ones(2)).tolist() == [2.0, 2.0]
    assert sys.path == before
    (tmp_path / "lonely.py").write_text("from no_such_sibling_xyz import k\n")
    with pytest.raises(UsageError, match=r"lonely.py failed to load: its import of "
                                         r"`no_such_sibling_xyz` failed"):
        load_library(str(tmp_path / "lonely.py"))
    # a module found by name whose own import of a dependency fails (issue 50: `scipy`) is
    # no "not found" either
    (tmp_path / "needs_dep.py").write_text("import no_such_dependency_xyz\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(UsageError, match=r"op library needs_dep failed to load: its "
                                             r"import of `no_such_dependency_xyz` failed"):
            load_library("needs_dep")
    finally:
        sys.path.remove(str(tmp_path))


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


def test_aclcap_errors_read_without_their_type(tmp_path):
    """A UsageError met inside another message (a model file that --samples-from cannot
    build) reads as its message, not `UsageError: ...` mid-line."""
    from aclcap.errors import CaptureError, UsageError, first_line

    assert first_line(UsageError("model file m.py: build_model raised ValueError: boom")) == \
        "model file m.py: build_model raised ValueError: boom"
    assert first_line(CaptureError("torch.export failed")) == "torch.export failed"
    model = tmp_path / "raises.py"
    model.write_text("def build_model(device, dtype):\n    raise ValueError('boom')\n\n\n"
                     "def make_inputs(size, device, dtype):\n    return ()\n")
    run = aclcap("check-meta", "--lib", "aclcap_ops", "--samples-from", str(model))
    assert run.code == 2 and "UsageError" not in run.stderr, run.stderr
    assert f"--samples-from {model}: model file {model}: build_model raised ValueError: " \
        "boom" in run.stderr


@pytest.mark.parametrize("command", ["capture", "bench"])
def test_blank_graph_mode_lists_the_choices_plainly(command):
    run = aclcap(command, str(ROOT / "examples" / "tiny_llama.py"), "--device", "cpu",
                 "--graph-mode", "")
    assert run.code == 2
    (line,) = run.stderr.strip().splitlines()
    both = ", or both comma-separated (full,piecewise)" if command == "bench" else ""
    assert line == f"error: --graph-mode '': choose full or piecewise{both}", line


def _bench_report(graph_host_us: float, mechanism: str = "aoti-piecewise"):
    from aclcap.bench.run import BenchReport, BenchRow

    rows = [BenchRow(1, "eager", "eager", 100.0, 110.0, 100.0, None, 90),
            BenchRow(1, "graph", mechanism, graph_host_us, graph_host_us, graph_host_us,
                     None, 1)]
    return BenchReport("tiny", "cpu", "float32", mechanism, 9, rows)


def test_graph_replay_that_costs_time_says_it_added():
    from aclcap.report.bench import bench_lines

    slower = "\n".join(bench_lines(_bench_report(150.0)))
    assert "size 1: graph replay (aoti-piecewise) added 50% to eager's step time" in slower
    assert "-50%" not in slower and "removed" not in slower
    faster = "\n".join(bench_lines(_bench_report(40.0)))
    assert "size 1: graph replay (aoti-piecewise) removed 60% of eager's step time" in faster


def test_bench_title_names_each_graph_modes_mechanism():
    """--graph-mode full,piecewise: the piecewise rows are aoti-piecewise, not the full
    graph's aoti the title used to name alone."""
    from dataclasses import replace

    from aclcap.report.bench import bench_table
    from tests.test_tables import render

    report = _bench_report(40.0, "aoti")
    report.rows.append(replace(report.rows[1], mode="piecewise", mechanism="aoti-piecewise"))
    title = render(bench_table(report, 80), 80).split("┏")[0]
    assert "(graph mode: aoti; piecewise: aoti-piecewise)" in title, title
    alone = render(bench_table(_bench_report(40.0), 80), 80).split("┏")[0]
    assert "(graph mode: aoti-piecewise)" in alone, alone


def test_exit_1_names_its_reasons_missing_metas_and_synthesis():
    """The summary counts missing metas apart from `failing`, and synthesis verdicts fail
    a run whose checks pass: the last line says which made the exit code 1."""
    from aclcap.meta.runner import MetaReport, MetaResult
    from aclcap.meta.synthesize.pipeline import Synthesis, SynthesisRun
    from aclcap.report.check_meta import exit_reasons
    from aclcap.status import Status

    rows = [MetaResult("ns::a.default", "ns::a(Tensor x) -> Tensor", ["CPU"], "MISSING",
                       Status.MISSING),
            MetaResult("ns::b.default", "ns::b(Tensor x) -> Tensor", ["CPU"], "register_fake",
                       Status.PASS)]
    report = MetaReport(rows, ["ns"])
    assert "0 failing" in report.summary()
    assert exit_reasons(report) == ["1 missing meta"]
    unverified = SynthesisRun([Synthesis("ns::b.default", reason="the kernel crashed")], [], 1.0)
    assert exit_reasons(MetaReport(rows[1:], ["ns"]), unverified) == [
        "1 of 1 op(s) to synthesize not verified (ns::b.default: see synthesis above)"]
    bare = SynthesisRun([Synthesis("ns::b.default", reason="no samples", no_samples=True)],
                        [], 1.0)
    assert exit_reasons(MetaReport(rows[1:], ["ns"]), bare) == [
        "1 op(s) to synthesize without samples"]
    assert exit_reasons(MetaReport(rows[1:], ["ns"])) == []


def test_a_c10_backtrace_is_cut_from_a_reason_unless_debug(monkeypatch):
    from aclcap.errors import DEBUG_ENV, summary

    text = ("Cannot call numel() on tensor with symbolic sizes/strides\nException raised from "
            "throw_cannot_call_with_symbolic at /pytorch/c10/core/TensorImpl.cpp:291 (most "
            "recent call first):\nframe #0: c10::Error::Error(...) + 0x9a (0x7f in "
            "/work/main/.venv/lib/libc10.so)")
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert summary(text) == "Cannot call numel() on tensor with symbolic sizes/strides"
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert "frame #0" in summary(text)


def test_torch_guard_errors_are_quiet_unless_debug():
    """Issue 44: ~40 lines of torch/_guards.py's own ERROR log before the table."""
    import subprocess
    import sys

    code = ("import logging; from aclcap._quiet import silence_torch; silence_torch(); "
            "logging.getLogger('torch._guards').error('Error while creating guard')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "Error while creating guard" not in done.stderr
    loud = code.replace("silence_torch(); ", "")
    done = subprocess.run([sys.executable, "-c", loud], capture_output=True, text=True)
    assert "Error while creating guard" in done.stderr  # what --debug keeps


def test_torchs_boilerplate_is_cut_from_a_reason():
    """Issue 50: "please report a bug to PyTorch" was repeated in every row's reason."""
    from aclcap.errors import summary

    said = summary("Dynamo failed to run FX node with fake tensors: call_function foo. "
                   "This is likely a bug in torch. Please report a bug to PyTorch.\n\n"
                   "For more information, run with TORCH_LOGS=\"+dynamic\".")
    assert said == "Dynamo failed to run FX node with fake tensors: call_function foo."
    assert summary("x failed. Please file an issue on github.") == "x failed."



def test_an_error_raised_in_aclcap_is_told_from_one_raised_in_torch_or_a_model():
    """Piecewise turns the step's own failures into failed rows; aclcap's own stay exit 3."""
    import torch

    from aclcap.errors import cut_middle, raised_in_aclcap

    with pytest.raises(RuntimeError) as torchs:
        torch.ones(2) + torch.ones(3)
    with pytest.raises(TypeError) as aclcaps:
        cut_middle(None, 10)  # type: ignore[arg-type]
    assert not raised_in_aclcap(torchs.value) and raised_in_aclcap(aclcaps.value)
