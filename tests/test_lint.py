"""check-meta --lint: concrete sizes in meta impls, file:line and a fix, escapes honoured."""

from __future__ import annotations

from pathlib import Path

from aclcap.lint import lint
from tests.conftest import ROOT, aclcap

FIXTURES = ROOT / "tests" / "fixtures"


def test_bundled_ops_are_lint_clean():
    assert lint([ROOT / "ops"]) == []
    run = aclcap("check-meta", "--lint")
    assert run.code == 0 and "0 concrete-size use(s)" in run.stdout


def test_cpp_meta_kernel_using_size_is_found():
    findings = lint([FIXTURES / "badops.cpp"])
    assert {(Path(f.file).name, f.rule) for f in findings} == {
        ("badops.cpp", "size()"), ("badops.cpp", "at::empty({...})")}
    assert all("x.size(0)" in f.code for f in findings)
    # The CPU kernels beside it use size() too, legitimately: only Meta kernels are linted.
    assert len({f.line for f in findings}) == 1


def test_python_fakes_and_escape_comment():
    findings = lint([FIXTURES / "lint_fakes.py"])
    assert [(f.line, f.rule) for f in findings] == [(8, "int(size)"), (14, ".item()")]
    assert "symbolic" in findings[0].hint


def test_cli_exit_1_with_findings_and_json():
    run = aclcap("check-meta", "--lint", str(FIXTURES), "--json", "-")
    assert run.code == 1
    rows = run.json()["results"]
    assert {r["rule"] for r in rows} == {"size()", "at::empty({...})", "int(size)", ".item()"}
    assert all({"file", "line", "rule", "code", "hint"} <= set(r) for r in rows)


def test_missing_path_is_bad_input():
    run = aclcap("check-meta", "--lint", "no/such/dir")
    assert run.code == 2 and "--lint no/such/dir: no such file or folder" in run.stderr
