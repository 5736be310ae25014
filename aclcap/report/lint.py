"""`aclcap check-meta --lint`: its findings as a table, compiler-style text, JSON, SARIF 2.1.0
or GitHub workflow commands (docs/check-meta.md: output formats)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

import aclcap
from aclcap.lint_rules import HINTS, RULE_IDS, SUMMARIES
from aclcap.report.layout import WIDE, document, short_paths, titled

if TYPE_CHECKING:
    from aclcap.meta.lint import Finding

FORMATS = ("table", "text", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(findings: list[Finding], width: int) -> RenderableType:
    """From WIDE columns up a table whose location column never wraps; below, a table's
    columns would fold paths and code into pieces, so each finding is a block as compilers
    print one: `path:line:col: ACL101 rule` on one line at any width (print it uncropped:
    the terminal, not rich, wraps a path wider than it), its code and fix indented under."""
    title = "aclcap check-meta --lint: meta impls that use concrete sizes"
    if width >= WIDE:
        table = titled(title)
        table.add_column("file:line:col", no_wrap=True)
        for col in ("rule", "code", "fix"):
            table.add_column(col, overflow="fold")
        for f in findings:
            table.add_row(_location(f), f.rule, f.code, f.hint)
        return table
    blocks: list[RenderableType] = [Text(title, style="bold")]
    for f in findings:
        blocks += [Text(f"{_location(f)}: {f.rule_id} {f.rule}", no_wrap=True, overflow="ignore"),
                   Padding(Text(f.code, style="dim"), (0, 0, 0, 4), expand=False),
                   Padding(Text(f"fix: {f.hint}"), (0, 0, 0, 2), expand=False)]
    return Group(*blocks)


def _location(f: Finding) -> str:
    return f"{short_paths(f.file)}:{f.line}:{max(f.column, 1)}"


def to_document(findings: list[Finding]) -> dict:
    return document("check-meta --lint", "cpu", [f.to_dict() for f in findings])


def text_lines(findings: list[Finding]) -> list[str]:
    """`file:line:col: ACL101 message (fix: ...)`, the form gcc, clang-tidy and ruff print:
    editors jump to it and grep finds it (a line is never wrapped)."""
    return [f"{_location(f)}: {f.rule_id} {SUMMARIES[f.rule]} (fix: {f.hint})" for f in findings]


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_command(level: str, message: str, file: str = "", line: int = 0,
                   column: int = 0, title: str = "") -> str:
    """One GitHub Actions workflow command (`::error file=...,line=...::message`), escaped as
    the runner decodes it; properties without a value are left out."""
    props = [f"{key}={_escape_property(str(value))}" for key, value in
             (("file", short_paths(file)), ("line", line), ("col", column), ("title", title))
             if value]
    return f"::{level} {','.join(props)}::{_escape_data(message)}" if props \
        else f"::{level}::{_escape_data(message)}"


def github_lines(findings: list[Finding]) -> list[str]:
    """One `::error` annotation per finding, on its file, line and column."""
    return [github_command("error", f"{SUMMARIES[f.rule]} (fix: {f.hint})", f.file, f.line,
                           f.column, f"{f.rule_id} {f.rule}") for f in findings]


def _uri(file: str) -> str:
    """Relative to the working directory (the repository root in CI, which is what code
    scanning resolves against), else an absolute file URI."""
    path = Path(file)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def to_sarif(findings: list[Finding]) -> dict:
    """A SARIF 2.1.0 log: one run whose driver lists every rule (ids stable, so ruleIndex is
    too) and one result per finding at its physical location."""
    index = {rule: i for i, rule in enumerate(RULE_IDS)}
    rules = [{"id": rule_id, "name": rule,
              "shortDescription": {"text": SUMMARIES[rule]},
              "fullDescription": {"text": f"{SUMMARIES[rule]}: {HINTS[rule]}"},
              "help": {"text": HINTS[rule]},
              "defaultConfiguration": {"level": "error"}}
             for rule, rule_id in RULE_IDS.items()]
    results = []
    for f in findings:
        region: dict = {"startLine": f.line}
        if f.column:
            region["startColumn"] = f.column
        if f.code:
            region["snippet"] = {"text": f.code}
        results.append({
            "ruleId": f.rule_id, "ruleIndex": index[f.rule], "level": "error",
            "message": {"text": f"{SUMMARIES[f.rule]} (fix: {f.hint})"},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(f.file)}, "region": region}}]})
    driver = {"name": "aclcap", "version": aclcap.__version__, "rules": rules}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver}, "results": results}]}


def formatted(findings: list[Finding], fmt: str) -> str:
    """The whole output of one non-table format, ending in a newline."""
    if fmt == "json":
        return json.dumps(to_document(findings), indent=2) + "\n"
    if fmt == "sarif":
        return json.dumps(to_sarif(findings), indent=2) + "\n"
    lines = text_lines(findings) if fmt == "text" else github_lines(findings)
    return "".join(line + "\n" for line in lines)
