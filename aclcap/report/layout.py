"""What every command's report shares: the JSON envelope, the console, status colours,
number formats and the one table builder with its 80/120-column layouts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

import aclcap
from aclcap.errors import UsageError
from aclcap.status import Status

STATUS_STYLE = {Status.PASS: "green", Status.BUILT: "green", Status.UP_TO_DATE: "green",
                Status.MISSING: "red", Status.FAIL: "red", Status.CRASHED: "red",
                Status.TIMEOUT: "red", Status.NOT_EXERCISED: "yellow",
                Status.UNVERIFIED: "yellow", Status.SKIPPED: "yellow"}
WIDE = 120  # console columns from which tables show every column under its long header


def document(command: str, device: str, results: list[dict], **extra: Any) -> dict:
    """The envelope every `--json` document has (docs/contracts.md: machine-readable output)."""
    import torch

    return {"tool": "aclcap", "command": command, "version": aclcap.__version__,
            "device": device, "torch": torch.__version__, "results": results, **extra}


def write_json(path: str, doc: dict) -> None:
    """`-` is stdout; a path's folder must exist (bad input otherwise)."""
    text = json.dumps(doc, indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    target = Path(path)
    if not target.parent.exists():
        raise UsageError(f"--json {path}: folder {target.parent} does not exist")
    target.write_text(text)


def console_for(json_path: str | None) -> Console:
    """Tables go to stderr when the JSON document takes stdout."""
    return Console(stderr=json_path == "-")


def status_cell(status: str, label: str | None = None) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{label or status}[/]"


def short_paths(text: str) -> str:
    """Paths under the working directory print relative: the table stays narrow."""
    cwd = str(Path.cwd()) + "/"
    return text.replace(cwd, "")


def line(text: str) -> Text:
    """A line of console markup, printed as `console.print(text, highlight=False)` would."""
    return Text.from_markup(text)


def plain(text: str) -> Text:
    """A line printed as is: no markup (it may hold brackets), no highlighting."""
    return Text(text)


def titled(title: str, show_lines: bool = False) -> Table:
    """At least as wide as its title where the console allows: rich wraps a title at the
    table's width, and a narrow table would break it over lines."""
    return Table(title=title, show_lines=show_lines,
                 min_width=max(cell_len(line) for line in title.splitlines()))


def notes(items: Iterable[tuple[str, list[str]]]) -> list[RenderableType]:
    """Reasons under a narrow table, indented under the name of their row: a reasons column
    there would wrap every row over many lines."""
    found: list[RenderableType] = []
    for label, reasons in items:
        if reasons:
            found.append(Text(label, style="bold"))
            found += [Padding(Text(reason), (0, 0, 0, 2), expand=False) for reason in reasons]
    return found


def num(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def short(value: float | None, decimals: int, whole_from: float) -> str:
    """`decimals` below `whole_from`, none from there: a column keeps its width at any scale."""
    return num(value, f".{decimals if value is None or value < whole_from else 0}f")


def times(value: float | None) -> str:
    return "—" if value is None else short(value, 2, 100) + "x"


class Col(NamedTuple):
    """A column: its header in a wide table (over lines of its own: numbers never wrap),
    its header in a narrow one (None: dropped there), and whether it holds text (left,
    folds) or numbers (right)."""

    wide: str
    narrow: str | None
    text: bool = False


def table(title: str, columns: Sequence[Col], rows: Iterable[Sequence[str]], wide: bool
          ) -> Table:
    """Text folds rather than ending in "…"; numbers never wrap, so a table too wide for the
    console squeezes its text instead (no_wrap with fold would crop a number unseen)."""
    keep = [i for i, c in enumerate(columns) if wide or c.narrow]
    built = titled(title)
    for c in (columns[i] for i in keep):
        header = c.narrow if c.narrow and not wide else c.wide
        if c.text:
            built.add_column(header, overflow="fold")
        else:
            built.add_column(header, justify="right", no_wrap=True)
    for cells in rows:
        built.add_row(*(cells[i] for i in keep))
    return built
