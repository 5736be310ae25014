"""`aclcap check-meta --lint`: one row per concrete-size use in a meta impl."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from aclcap.report.layout import document, short_paths

if TYPE_CHECKING:
    from aclcap.meta.lint import Finding


def render(findings: list[Finding], width: int | None = None) -> Table:
    """Four folding columns: the same at any width."""
    table = Table(title="aclcap check-meta --lint: meta impls that use concrete sizes")
    for col in ("file:line", "rule", "code", "fix"):
        table.add_column(col, overflow="fold")
    for f in findings:
        table.add_row(f"{short_paths(f.file)}:{f.line}", f.rule, f.code, f.hint)
    return table


def to_document(findings: list[Finding]) -> dict:
    return document("check-meta --lint", "cpu", [f.to_dict() for f in findings])
