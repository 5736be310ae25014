"""check-meta --synthesize --synthesize-cpp on a Python op library under two namespaces
(tests/fixtures/synth_two_ns.py): one C++ file for both that builds (each helper defined
once, a kernel name two namespaces share written twice apart), one verdict per op across
the two files (the op whose schema hides a write is held back in both, the same reason
above each), and no folder of this machine in either file or in any reason. A C++ build
that fails (here: a machine without its compiler) holds back no Python fake that passed:
the run says so once, by the build's first error line."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

from aclcap.build import BuildError
from aclcap.meta.lint import lint
from aclcap.meta.synthesize.emit_cpp import emit_cpp
from aclcap.meta.synthesize.pipeline import _compile_in_child
from aclcap.meta.synthesize.rules import Dim, LeadingDims, OpRule, OutputRule
from tests.conftest import ROOT, Run
from tests.test_synthesize import _ruff, _synthesis, compare_answers, synthesize_fixture

NS_A, NS_B = "aclcap_twons_a::", "aclcap_twons_b::"
HIDDEN = NS_A + "add_rms_norm.default"
VERIFIED = {NS_A + "silu_and_mul.default", NS_B + "silu_and_mul.default",
            NS_B + "gelu_and_mul.default"}


def _run(out: Path, **env: str) -> tuple[Run, dict, Path, Path]:
    cpp = out / "twons_metas.cpp"
    return (*synthesize_fixture(out, "synth_two_ns", "--synthesize-cpp", str(cpp), **env), cpp)


@pytest.fixture(scope="module")
def two_ns_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("twons"))


@pytest.fixture(scope="module")
def no_compiler_run(tmp_path_factory):
    """A machine whose C++ compiler is missing: the build fails for real, in the shell."""
    return _run(tmp_path_factory.mktemp("twons_nocxx"), CXX="/nonexistent/bin/c++")


def _folders() -> list[str]:
    """Folders of this machine that no emitted file or reason may name."""
    return [str(ROOT), str(Path.home()) + "/", sys.prefix, sys.base_prefix, "site-packages",
            tempfile.gettempdir() + "/", os.environ["ACLCAP_CACHE_DIR"]]


def _comments_above(text: str, head: str, mark: str) -> str:
    """The comment sentences of the function whose line starts with `head`: the comment
    lines just above it (C++) or just below it (Python's body), wrapping undone."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(head))
    step, i, found = (-1, at - 1, []) if mark == "//" else (1, at + 1, [])
    while lines[i].strip().startswith(mark):
        found.append(lines[i].strip().removeprefix(mark).strip())
        i += step
    return " ".join(found[::step])


def test_one_cpp_file_for_two_namespaces_builds_and_equals_the_answers(two_ns_run):
    _, doc, _, cpp = two_ns_run
    assert doc["synthesis"]["cpp_build_error"] is None
    library = doc["synthesis"]["cpp_library"]
    assert library
    source = cpp.read_text()
    for helper in ("c10::SymDimVector leading_dims(", "at::Tensor empty_in_order(",
                   "at::Tensor empty_in_order_of("):
        assert source.count(helper) == 1, helper
    assert source.count("TORCH_LIBRARY_IMPL(") == 2
    assert 'm.impl("silu_and_mul", TORCH_FN(aclcap_twons_a_silu_and_mul_meta));' in source
    assert 'm.impl("silu_and_mul", TORCH_FN(aclcap_twons_b_silu_and_mul_meta));' in source
    assert 'm.impl("gelu_and_mul", TORCH_FN(gelu_and_mul_meta));' in source  # no clash
    assert lint([cpp]) == []
    compared = compare_answers("synth_two_ns", library)
    assert compared["mismatches"] == [] and set(compared["checked"]) == VERIFIED


def test_the_python_fakes_that_passed_are_registered(two_ns_run):
    run, doc, py, _ = two_ns_run
    assert run.code == 1, run.stderr  # the hidden write
    synthesis = _synthesis(doc)
    assert {op for op, s in synthesis.items() if s["status"] == "verified"} == VERIFIED, \
        {op: s["verdict"] for op, s in synthesis.items()}
    assert all(synthesis[op]["verified"] == {"python": True, "cpp": True} for op in VERIFIED)
    assert synthesis[NS_B + "gelu_and_mul.default"]["rule"] == [
        "out 0: [*x.shape[:-1], x.shape[-1] // 2], dtype of x, stride order of x"]
    assert py.read_text().count("@torch.library.register_fake(") == len(VERIFIED)
    compared = compare_answers("synth_two_ns", str(py))
    assert compared["mismatches"] == [] and set(compared["checked"]) == VERIFIED
    assert _ruff(py).returncode == 0 and lint([py]) == []


def test_the_hidden_write_is_held_back_in_both_files_for_the_same_reason(two_ns_run):
    _, doc, py, cpp = two_ns_run
    s = _synthesis(doc)[HIDDEN]
    assert s["status"] == "failed" and s["defects"][0]["message"].startswith(
        "writes `residual` but the schema does not mark it mutable")
    assert set(s["failures"]) == {"python", "cpp"}
    python, source = py.read_text(), cpp.read_text()
    assert '@torch.library.register_fake("aclcap_twons_a::add_rms_norm")' not in python
    assert "# NOT REGISTERED: the reason is below.\ndef _fake_add_rms_norm(" in python
    assert '  // m.impl("add_rms_norm", TORCH_FN(add_rms_norm_meta));' in source
    in_python = _comments_above(python, "def _fake_add_rms_norm(", "#")
    in_cpp = _comments_above(source, "at::Tensor add_rms_norm_meta(", "//")
    assert in_cpp.endswith(in_python)  # the C++ comment also has the schema line first
    assert "Verification FAILED (python: opcheck test_schema: RuntimeError: Argument residual " \
        "is not defined as mutable but was mutated" in in_python


def test_no_folder_of_this_machine_in_the_files_or_the_reasons(two_ns_run, no_compiler_run):
    for _, doc, py, cpp in (two_ns_run, no_compiler_run):
        said = [py.read_text(), cpp.read_text(), str(doc["synthesis"]["cpp_build_error"])]
        for s in _synthesis(doc).values():
            said += [s["verdict"], *s["failures"].values(), *s["notes"]]
        for text in said:
            assert not [f for f in _folders() if f in text], text


def test_a_cpp_build_failure_holds_back_no_python_fake_and_is_said_once(no_compiler_run):
    run, doc, py, cpp = no_compiler_run
    error = doc["synthesis"]["cpp_build_error"]
    assert doc["synthesis"]["cpp_library"] is None
    assert error and "\n" not in error and "c++" in error, error
    synthesis = _synthesis(doc)
    assert {op for op, s in synthesis.items() if s["status"] == "verified"} == VERIFIED
    assert all(synthesis[op]["verified"] == {"python": True} for op in VERIFIED)
    assert py.read_text().count("@torch.library.register_fake(") == len(VERIFIED)
    # the fake's own verdict holds in both files, whatever the C++ build did
    assert '  // m.impl("add_rms_norm", TORCH_FN(add_rms_norm_meta));' in cpp.read_text()
    assert f"// NOT BUILT: {error}" in cpp.read_text()
    assert run.code == 1 and run.stdout.count(error) == 1  # once, for the run
    assert "C++ Meta kernels NOT built" in run.stdout
    assert "the emitted C++ does not build" in " ".join(run.stdout.split())  # the exit line


def test_a_failed_build_is_said_by_its_first_error_line(tmp_path):
    """Two emitted files pasted into one (a real mistake): the compiler's first error is
    the whole message, its path cut to the file name, never the compile command."""
    rules = [OpRule(f"{ns}::half.default", f"{ns}::half(Tensor x) -> Tensor",
                    [OutputRule((LeadingDims("x", 1), Dim("x", -1)))])
             for ns in ("aclcap_twons_x", "aclcap_twons_y")]
    twice = tmp_path / "twice.cpp"
    twice.write_text(emit_cpp(rules[:1]) + emit_cpp(rules[1:]))
    with pytest.raises(BuildError) as raised:
        _compile_in_child(twice, tmp_path / "build")
    message = str(raised.value)
    assert re.match(r"twice\.cpp:\d+:\d+: error: redefinition of .*leading_dims", message), \
        message
    assert "\n" not in message and "-isystem" not in message
