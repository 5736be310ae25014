"""check-meta where CI reads it: --junit-xml (a testcase per op) and --format github
(::error annotations at each failing op's registration site)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from aclcap.report.ci import registration_site
from tests.conftest import ROOT, aclcap

BADOPS = ROOT / "tests" / "fixtures" / "badops.py"


def test_registration_site_from_meta_source():
    assert registration_site("register_fake (/x/ops.py:46)") == ("/x/ops.py", 46)
    assert registration_site("C++ composite (/x/a.cpp:85): tracing runs its C++ body") == (
        "/x/a.cpp", 85)
    assert registration_site("none") is None


def test_junit_and_github_annotations(tmp_path: Path):
    junit = tmp_path / "meta.xml"
    doc = tmp_path / "meta.json"
    run = aclcap("check-meta", "--lib", str(BADOPS), "--namespace", "aclcap_test",
                 "--format", "github", "--junit-xml", str(junit), "--json", str(doc))
    assert run.code == 1
    import json

    rows = {r["op"]: r for r in json.loads(doc.read_text())["results"]}
    failing = {op for op, r in rows.items() if r["status"] in ("fail", "missing", "crashed",
                                                                "timeout")}
    skipped = {op for op, r in rows.items() if r["status"] in ("not_exercised", "unverified")}
    assert failing and skipped

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == set(rows)
    assert int(suite.get("tests", "")) == len(rows)
    assert int(suite.get("failures", "")) == len(failing)
    assert int(suite.get("skipped", "")) == len(skipped)
    assert {op for op, c in cases.items() if c.find("failure") is not None} == failing
    assert {op for op, c in cases.items() if c.find("skipped") is not None} == skipped
    wrong = cases["aclcap_test::wrong_shape.default"].find("failure")
    assert wrong is not None and wrong.get("message") == rows[
        "aclcap_test::wrong_shape.default"]["reasons"][0]

    annotations = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(annotations) == len(failing)
    located = [a for a in annotations if "aclcap_test%3A%3Awrong_shape.default" in a]
    assert len(located) == 1
    site = located[0].split("::")[1].removeprefix("error ").split(",")
    props = dict(p.split("=", 1) for p in site)
    line = (ROOT / props["file"]).read_text().split("\n")[int(props["line"]) - 1]
    assert "register_fake" in line and "wrong_shape" in line


def test_ci_options_are_refused_where_they_do_not_apply(tmp_path: Path):
    sarif = aclcap("check-meta", "--format", "sarif")
    assert sarif.code == 2 and "--format sarif is for --lint" in sarif.stdout + sarif.stderr
    junit = aclcap("check-meta", "--lint", "--junit-xml", str(tmp_path / "x.xml"))
    assert junit.code == 2 and "--junit-xml is for check-meta's ops" in \
        junit.stdout + junit.stderr


def test_capture_junit_and_annotations_on_the_model_line(tmp_path: Path):
    """two_ops_one_line.py cannot be traced (line 22 calls an op with no fake): every size
    fails, each a JUnit failure and an ::error on that line."""
    junit = tmp_path / "capture.xml"
    model = ROOT / "tests" / "models" / "two_ops_one_line.py"
    run = aclcap("capture", str(model), "--device", "cpu", "--shapes", "2,4", "--format",
                 "github", "--junit-xml", str(junit))
    assert run.code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("2", "2", "0")
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names == ["size 2", "size 4"]
    failure = next(suite.iter("failure"))
    assert "aclcap_twoops::b fails at two_ops_one_line.py:22" in failure.get("message", "")
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(annotations) == 2
    assert all(a.startswith("::error file=tests/models/two_ops_one_line.py,line=22,")
               for a in annotations)
    bad = aclcap("capture", str(model), "--format", "sarif")
    assert bad.code == 2 and "--format sarif: capture prints table or github" in \
        bad.stdout + bad.stderr
