"""Result objects -> rich tables and JSON documents. Both read the same rows, so the printed
table and `--json` never disagree (../shared/README.md section 3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import aclcap
from aclcap.build import BuildReport
from aclcap.errors import UsageError
from aclcap.metacheck import MetaReport

STATUS_STYLE = {"pass": "green", "built": "green", "up_to_date": "green", "missing": "red",
                "fail": "red", "failed": "red", "crashed": "red", "timeout": "red",
                "not_exercised": "yellow", "skipped": "yellow"}


def document(command: str, device: str, results: list[dict], **extra: Any) -> dict:
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


def _status(text: str) -> str:
    return f"[{STATUS_STYLE.get(text, 'white')}]{text}[/]"


def build_table(report: BuildReport) -> Table:
    table = Table(title=f"aclcap build -> {report.build_dir}")
    for col in ("target", "status", "time (s)", "output / reason"):
        table.add_column(col)
    for t in report.targets:
        detail = t.output or t.reason
        if t.status == "failed":
            detail = t.reason
        table.add_row(t.name, _status(t.status.replace("_", " ")), f"{t.seconds:.2f}", detail)
    return table


def _short_paths(text: str) -> str:
    """Paths under the working directory print relative: the table stays narrow."""
    cwd = str(Path.cwd()) + "/"
    return text.replace(cwd, "")


def meta_table(report: MetaReport) -> Table:
    table = Table(title=f"aclcap check-meta: namespaces {', '.join(report.namespaces)}",
                  show_lines=True)
    table.add_column("op / schema", ratio=4, overflow="fold")
    table.add_column("kernels")
    table.add_column("meta impl", ratio=2, overflow="fold")
    table.add_column("status")
    table.add_column("reasons", ratio=4)
    for r in report.results:
        signature = r.schema[r.schema.find("("):]  # the op line already names it
        table.add_row(f"[bold]{r.op}[/]\n[dim]{signature}[/]", ", ".join(r.kernels) or "none",
                      _short_paths(r.meta_source), _status(r.status), "\n".join(r.reasons))
    return table


def console_for(json_path: str | None) -> Console:
    """Tables go to stderr when the JSON document takes stdout."""
    return Console(stderr=json_path == "-")
