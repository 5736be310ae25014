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

NprocOpt = Annotated[int | None, typer.Option(
    "--nproc", metavar="N", min=1, help="Run on N tensor-parallel ranks of torch.distributed "
    "(gloo on cpu, nccl on cuda, hccl on npu; one device each); the default process group is up "
    "before build_model is called. At most the devices present (cuda, npu) or the cores (cpu), "
    "and as many as the memory holds at about 1 GiB a rank.")]
OversubscribeOpt = Annotated[bool, typer.Option(
    "--oversubscribe", help="With --nproc on cpu: allow more ranks than cores.")]
TimeoutOpt = Annotated[float, typer.Option(
    "--timeout", metavar="SECONDS", min=0.1, help="With --nproc: a rank that has not reached its "
    "next phase (the next size, say) within this time is reported (which collective it waits in, "
    "at which model line, or that it is busy in its own work) and every rank is ended.")]
PortOpt = Annotated[int, typer.Option(
    "--port", min=0, max=65535, help="With --nproc: the loopback port of the ranks' TCPStore "
    "(0: any free port).")]
MaxAutotuneOpt = Annotated[bool, typer.Option(
    "--max-autotune", help="cpu: compile the AOTI artifact with Inductor's max_autotune and "
    "freezing (C++ GEMM templates over prepacked weights): a faster replay for a slower "
    "first compile (cached afterwards).")]
PerRankOpt = Annotated[bool, typer.Option(
    "--per-rank", help="With --nproc: print every rank's rows, not only the worst rank's per "
    "size (the JSON always holds every rank's).")]


# The names of graph/step.py's DTYPES, checked here before torch (which that map needs) is
# imported; tests/test_cli_errors.py holds the two equal.
DTYPE_NAMES = ("float32", "bfloat16", "float16")


def check_dtype_name(name: str) -> None:
    if name not in DTYPE_NAMES:
        raise UsageError(f"--dtype {name!r}: choose one of {', '.join(DTYPE_NAMES)}")


def check_model_path(path: Path | str) -> None:
    """The model file exists and is a file: checked before anything is imported."""
    from aclcap.loading.model_file import check_model_file

    check_model_file(Path(path))


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
    """The spinner on a terminal; off elsewhere, where stopping it would leave a blank line
    before an error line."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                    transient=True, disable=not err_console.is_terminal)


def stepper(progress: Progress) -> Callable[[str, int, int], None]:
    """A task on `progress` and the `on_progress(message, done, total)` callback that drives
    it, as run_capture and run_bench report their steps (total 0: indeterminate)."""
    task = progress.add_task("loading the model file", total=None)

    def advance(message: str, done: int, total: int) -> None:
        progress.update(task, description=message, completed=done, total=total or None)

    return advance


def quiet_torch() -> None:
    """torch's log noise off unless --debug (the reports list each break once)."""
    if not state.debug:
        from aclcap._quiet import silence_torch

        silence_torch()
