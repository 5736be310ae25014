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
from aclcap.crash_guard import note
from aclcap.errors import UsageError

# --help's panels, the same in every command. Each help is one short line that fits 80
# columns uncut (tests/test_help.py); each command's docs/ page says the rest
# (tests/test_docs.py).
INPUTS, CHECKS, GRAPH, RANKS, OUTPUT = "Inputs", "Checks", "Graph mode", "Ranks (--nproc)", \
    "Output"

JsonOpt = Annotated[str | None, typer.Option(
    "--json", metavar="PATH", rich_help_panel=OUTPUT,
    help="Also write the results as JSON to PATH ('-': stdout).")]
DeviceOpt = Annotated[str, typer.Option(
    metavar="DEVICE", rich_help_panel=INPUTS, help="auto (npu > cuda > cpu), cpu, cuda or npu.")]
DtypeOpt = Annotated[str, typer.Option(metavar="DTYPE", rich_help_panel=INPUTS,
                                       help="float32, bfloat16 or float16.")]
ShapesOpt = Annotated[str | None, typer.Option(
    "--shapes", metavar="1,2,4,8", rich_help_panel=INPUTS,
    help="Sizes (tokens per step); default: the model file's SHAPES.")]

NprocOpt = Annotated[int | None, typer.Option(
    "--nproc", metavar="N", min=1, rich_help_panel=RANKS,
    help="Run on N tensor-parallel ranks, one device each.")]
OversubscribeOpt = Annotated[bool, typer.Option(
    "--oversubscribe", rich_help_panel=RANKS, help="On cpu: allow more ranks than cores.")]
TimeoutOpt = Annotated[float, typer.Option(
    "--timeout", metavar="SECONDS", min=0.1, rich_help_panel=RANKS,
    help="A rank stuck this long is diagnosed; all ranks end.")]
PortOpt = Annotated[int, typer.Option(
    "--port", metavar="PORT", min=0, max=65535, rich_help_panel=RANKS,
    help="The ranks' TCPStore port (0: any free one).")]
MaxAutotuneOpt = Annotated[bool, typer.Option(
    "--max-autotune", rich_help_panel=GRAPH,
    help="cpu: compile AOTI with max_autotune and freezing.")]
PerRankOpt = Annotated[bool, typer.Option(
    "--per-rank", rich_help_panel=RANKS, help="Print every rank's rows, not the worst's.")]
CpuMechanismOpt = Annotated[str, typer.Option(
    "--cpu-mechanism", metavar="auto|aoti|inductor", rich_help_panel=GRAPH,
    help="cpu: aoti, inductor, or auto (aoti; inductor where export fails).")]
GraphModeOpt = Annotated[str, typer.Option(
    "--graph-mode", metavar="MODE", rich_help_panel=GRAPH,
    help="full (a graph per size) or piecewise (split at ops; cpu).")]
SplitOpsOpt = Annotated[str | None, typer.Option(
    "--split-ops", metavar="NS::OP,...", rich_help_panel=GRAPH,
    help="Piecewise: the ops to split at (default: SPLITTING_OPS).")]

FakesOpt = Annotated[list[Path] | None, typer.Option(
    "--fakes", metavar="FILE.py", rich_help_panel=INPUTS,
    help="Fake impls to load after the model file (repeatable).")]


def check_fakes(fakes: list[Path] | None) -> tuple[str, ...]:
    """--fakes names existing files (a .py the synthesis wrote, or a .so of Meta kernels):
    checked before anything is imported; loaded after the model file's import."""
    for path in fakes or []:
        if not path.is_file():
            raise UsageError(f"--fakes {path}: no such file; pass the file `aclcap check-meta "
                             "--synthesize FILE.py` wrote (or a .so of Meta kernels)")
    return tuple(str(p) for p in fakes or [])


# The names of graph/step.py's DTYPES, checked here before torch (which that map needs) is
# imported; tests/test_cli_errors.py holds the two equal.
DTYPE_NAMES = ("float32", "bfloat16", "float16")


def check_dtype_name(name: str) -> None:
    if name not in DTYPE_NAMES:
        raise UsageError(f"--dtype {name!r}: choose one of {', '.join(DTYPE_NAMES)}")


def check_graph_mode(value: str, several: bool = False) -> None:
    """--graph-mode is one of the modes (bench: several, comma-separated), said plainly
    before parse_graph_mode reads it."""
    from aclcap.graph.options import GRAPH_MODES

    modes = [m.strip() for m in value.split(",")] if several else [value]
    if not value.strip() or any(m not in GRAPH_MODES for m in modes):
        choices = " or ".join(GRAPH_MODES)
        both = f", or both comma-separated ({','.join(GRAPH_MODES)})" if several else ""
        raise UsageError(f"--graph-mode {value!r}: choose {choices}{both}")


def check_model_path(path: Path | str) -> None:
    """The model file exists and is a file: checked before anything is imported."""
    from aclcap.loading.model_file import check_model_file

    check_model_file(Path(path))


def check_library_option(spec: str) -> None:
    """--lib names an existing library, by path or module; a folder is said to be one
    (loading it would fail in dlopen's words, "could not load this library")."""
    from aclcap.loading.libraries import check_library_path

    folder = Path(spec).is_dir()
    try:
        check_library_path(spec)
    except UsageError:
        if not folder:
            raise
    else:
        if not folder or "/" not in spec:  # `--lib aclcap_ops` in a checkout: the module
            return
    raise UsageError(f"--lib {spec}: is a directory; pass the op library's .so or .py file "
                     "in it, or an importable module name")


def check_output_path(option: str, path: str | Path | None) -> None:
    """A file the command will write must be writable before the run, not after it."""
    if path is None or str(path) == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    if not target.parent.is_dir():
        raise UsageError(f"{option} {path}: folder {target.parent} does not exist")
    try:  # the one sure test (root may write anywhere but /proc): open it, leave no file
        if target.exists():
            target.open("a").close()
        else:
            target.open("x").close()
            target.unlink()
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot be written ({exc.strerror}); give a path "
                         "in a writable folder") from None


def check_split_ops(model: Path | str, split_ops: tuple[str, ...] | None) -> None:
    """Each --split-ops op must be registered once the model file has loaded its op
    libraries: an unknown name splits nowhere, and the run would capture one whole graph."""
    if split_ops:
        from aclcap.loading.op_names import unregistered_op

        for op in split_ops:
            if reason := unregistered_op(model, op):
                raise UsageError(f"--split-ops {op}: {reason}")


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
    note("loading the model file")

    def advance(message: str, done: int, total: int) -> None:
        progress.update(task, description=message, completed=done, total=total or None)
        note(message)  # what a crash of the process happened in

    return advance


def quiet_torch() -> None:
    """torch's log noise off unless --debug (the reports list each break once)."""
    if not state.debug:
        from aclcap._quiet import silence_torch

        silence_torch()
