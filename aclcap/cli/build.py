"""`aclcap build`: parse, build, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from aclcap.cli._errors import EXIT_BAD_INPUT, err_console, handle_errors
from aclcap.cli._options import JsonOpt, check_output_path, progress_bar


@handle_errors
def build(
    clean: Annotated[bool, typer.Option("--clean", help="Delete the build folder first.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the compiler commands.")] = False,
    build_dir: Annotated[Path | None, typer.Option(
        "--build-dir", metavar="DIR",
        help="Where to build (default: $ACLCAP_BUILD_DIR, else build/).")] = None,
    src: Annotated[Path | None, typer.Option(
        "--src", metavar="DIR", help="Op library sources (default: aclcap_ops/).")] = None,
    json_path: JsonOpt = None,
) -> None:
    """Build the kernels of the bundled op library into a loadable library (incremental;
    per-backend skip reasons). Exit 2 on a compile error, with the compiler's first error
    lines."""
    from aclcap.build import build as run_build
    from aclcap.report import build as build_report
    from aclcap.report.layout import console_for, write_json

    check_output_path("--json", json_path)
    with progress_bar() as progress:
        task = progress.add_task("building", total=1)

        def started(name: str) -> None:
            progress.update(task, description=f"compiling {name} target (ninja)")

        result = run_build(build_dir, clean=clean, verbose=verbose, on_target=started, src=src)
        progress.update(task, completed=1)
    if json_path:
        write_json(json_path, build_report.to_document(result))
    console = console_for(json_path)
    console.print(build_report.render(result, console.width))
    if not result.ok:
        err_console.print(f"[red]error:[/] building failed:\n{escape(result.targets[0].reason)}")
        raise typer.Exit(EXIT_BAD_INPUT)
