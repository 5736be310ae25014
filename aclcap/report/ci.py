"""check-meta's and capture's results where CI reads them: GitHub workflow-command
annotations (at an op's registration site, a model line) and JUnit XML for CI dashboards
(one testcase per op, per size and rank)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from aclcap.report.lint import github_command
from aclcap.status import FAILING, NOT_RUN, Status

if TYPE_CHECKING:
    from aclcap.capture.run import CaptureReport, CaptureRow
    from aclcap.meta.runner import MetaReport

_SITE = re.compile(r"\((?P<file>[^()]+?):(?P<line>\d+)\)")


def registration_site(meta_source: str) -> tuple[str, int] | None:
    """`register_fake (ops.py:46)`, `C++ composite (ops.cpp:85): ...` -> (file, line)."""
    found = _SITE.search(meta_source)
    return (found["file"], int(found["line"])) if found else None


def check_meta_annotations(report: MetaReport) -> list[str]:
    """One `::error` per failing op, on its registration site where the dispatcher knows it
    (a missing meta has none: the annotation is the run's, not a file's)."""
    lines = []
    for row in report.results:
        if row.status not in FAILING:
            continue
        site = registration_site(row.meta_source) or ("", 0)
        reasons = "; ".join(f.text() for f in row.findings) or str(row.status)
        lines.append(github_command("error", f"{row.op} {row.status}: {reasons}", *site,
                                    title=f"aclcap check-meta {row.op}"))
    return lines


def check_meta_junit(report: MetaReport) -> str:
    """A JUnit XML document: a testcase per op, failing ops a failure with the reasons,
    ops not exercised (or a C++ composite no sample ran) skipped with why."""
    failures = sum(r.status in FAILING for r in report.results)
    skipped = sum(r.status in NOT_RUN for r in report.results)
    suite = ET.Element("testsuite", name="aclcap check-meta", tests=str(len(report.results)),
                       failures=str(failures), errors="0", skipped=str(skipped))
    for row in report.results:
        case = ET.SubElement(suite, "testcase", classname="aclcap.check_meta."
                             + row.op.split("::", 1)[0], name=row.op)
        reasons = [f.text() for f in row.findings]
        if row.status in FAILING:
            failure = ET.SubElement(case, "failure", type=str(row.status),
                                    message=reasons[0] if reasons else str(row.status))
            failure.text = "\n".join(reasons)
        elif row.status in NOT_RUN:
            ET.SubElement(case, "skipped", message="; ".join(reasons) or str(row.status))
    return _document(suite)


def _capture_rows(result: CaptureReport) -> list[CaptureRow]:
    return sorted(result.rank_rows or result.rows, key=lambda r: (r.size, r.rank or 0))


def _case_name(row: CaptureRow) -> str:
    return f"size {row.size}" + (f" rank {row.rank}" if row.rank is not None else "")


def capture_annotations(result: CaptureReport) -> list[str]:
    """One `::error` per failing size (and rank), on the model line the trace failed at
    where it knows one, else on the model file."""
    error = result.trace.error or {}
    file, line = (error.get("file") or result.model_path), int(error.get("line") or 0)
    return [github_command("error", f"{_case_name(r)} {r.status}: "
                           f"{'; '.join(r.reasons) or str(r.status)}", file, line,
                           title=f"aclcap capture {result.model} {_case_name(r)}")
            for r in _capture_rows(result) if r.status != Status.PASS]


def capture_junit(result: CaptureReport) -> str:
    """A JUnit XML document: a testcase per size (per size and rank with --nproc)."""
    rows = _capture_rows(result)
    failures = sum(r.status not in (Status.PASS, Status.SKIPPED) for r in rows)
    skipped = sum(r.status == Status.SKIPPED for r in rows)
    suite = ET.Element("testsuite", name=f"aclcap capture {result.model}",
                       tests=str(len(rows)), failures=str(failures), errors="0",
                       skipped=str(skipped))
    for row in rows:
        case = ET.SubElement(suite, "testcase", classname=f"aclcap.capture.{result.model}",
                             name=_case_name(row))
        if row.status == Status.SKIPPED:
            ET.SubElement(case, "skipped", message="; ".join(row.reasons) or "skipped")
        elif row.status != Status.PASS:
            failure = ET.SubElement(case, "failure", type=str(row.status),
                                    message=row.reasons[0] if row.reasons else str(row.status))
            failure.text = "\n".join(row.reasons)
    return _document(suite)


def _document(suite: ET.Element) -> str:
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write(annotations: list[str], junit: str, github_to: TextIO | None,
          junit_xml: Path | None) -> None:
    """`--format github` (workflow commands on `github_to`) and `--junit-xml`, as both
    commands write them."""
    if github_to is not None:
        github_to.writelines(line + "\n" for line in annotations)
    if junit_xml is not None:
        junit_xml.write_text(junit)
