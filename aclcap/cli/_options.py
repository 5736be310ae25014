"""Options and helpers that several commands share: typed `Annotated` options, output-path
validation before any work starts, the progress bar, and torch's log noise."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from aclcap.cli._errors import err_console, state
from aclcap.errors import UsageError

JsonOpt = Annotated[
    str | None,
    typer.Option("--json", metavar="PATH",
                 help="Also write the results as one JSON document to PATH ('-' for stdout)."),
]
DeviceOpt = Annotated[str, typer.Option(
    help="auto (npu > cuda > cpu), cpu (AOTInductor), cuda (CUDA graphs) or npu (aclgraph).")]
DtypeOpt = Annotated[str, typer.Option(help="float32, bfloat16 or float16.")]
ShapesOpt = Annotated[str | None, typer.Option(
    "--shapes", metavar="1,2,4,8", help="Sizes (tokens per step) to capture; default: the "
    "model file's SHAPES, else 1,2,4,8.")]


def check_output_path(option: str, path: str | Path | None) -> None:
    """A file the command will write must be writable before the run, not after it."""
    if path is None or str(path) == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    if not target.parent.is_dir():
        raise UsageError(f"{option} {path}: folder {target.parent} does not exist")


def progress_bar() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                    transient=True)


def stepper(progress: Progress) -> Callable[[str, int, int], None]:
    """A task on `progress` and the `on_progress(message, done, total)` callback that drives
    it, as run_capture and run_bench report their steps (total 0: indeterminate)."""
    task = progress.add_task("loading the model file", total=None)

    def advance(message: str, done: int, total: int) -> None:
        progress.update(task, description=message, completed=done, total=total or None)

    return advance


def quiet_torch() -> None:
    """torch.compile logs every graph break as a warning and torch.export dumps the graph on
    failure; the report lists each once, so they are silenced unless --debug."""
    if not state.debug:
        import logging
        import warnings

        import torch

        torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR,
                                export=logging.CRITICAL)
        warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")
