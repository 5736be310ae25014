"""`aclcap bench --profile`: per size, each mode's top ops side by side."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from rich.table import Table

from aclcap.report.layout import titled

if TYPE_CHECKING:
    from aclcap.bench.run import BenchReport


def render(result: BenchReport, width: int | None = None) -> list[Table]:
    """One table per profiled size; the columns are as narrow as their shares at any
    width."""
    return [profile_table(result, size) for size in sorted({p.size for p in result.profiles})]


def to_dicts(result: BenchReport) -> list[dict]:
    """The profiles as the bench document's `profile` list."""
    return [asdict(p) for p in result.profiles]


def profile_table(result: BenchReport, size: int) -> Table:
    """One size's profiles side by side: each op's share of the step per mode, so what the
    graph removed (a share gone) and what remains read across a row. A mode's step time
    goes under its name: the columns stay as narrow as their shares."""
    profiles = [p for p in result.profiles if p.size == size]
    table = titled(f"bench --profile, size {size}: share of the step by self time")
    table.add_column("op", overflow="fold")
    for p in profiles:
        table.add_column(f"{p.mode}\n{p.step_us:.0f} µs", justify="right", no_wrap=True)
    names: list[str] = []
    for p in profiles:
        names += [t["name"] for t in p.top if t["name"] not in names]
    for name in names:
        cells = []
        for p in profiles:
            share = next((t["share"] for t in p.top if t["name"] == name), None)
            cells.append("—" if share is None else f"{100 * share:.0f}%")
        table.add_row(name, *cells)
    return table
