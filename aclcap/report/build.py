"""`aclcap build`: one row per backend target."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from aclcap.report.layout import document, status_cell
from aclcap.status import Status

if TYPE_CHECKING:  # result types only: importing them pulls in torch, which `build` avoids
    from aclcap.build import BuildReport


def render(result: BuildReport, width: int) -> Table:
    """Four short columns: the same at any width."""
    table = Table(title=f"aclcap build -> {result.build_dir}")
    for col in ("target", "status", "time (s)", "output / reason"):
        table.add_column(col)
    for t in result.targets:
        detail = t.output or t.reason
        if t.status == Status.FAIL:
            detail = t.reason
        table.add_row(t.name, status_cell(t.status, t.status.replace("_", " ")),
                      f"{t.seconds:.2f}", detail)
    return table


def to_document(result: BuildReport) -> dict:
    return document("build", "cpu", [t.to_dict() for t in result.targets],
                    build_dir=result.build_dir)
