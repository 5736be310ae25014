"""The aclcap command line: one module per command, each parses its arguments, calls one
library function and prints the result. Errors become one line and an exit code through
one table (_errors.py): 0 passed, 1 a check failed, 2 bad input, 3 a bug of aclcap."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from aclcap.cache_budget import max_bytes
from aclcap.cli._errors import OneLineErrors, closed_pipe, handle_errors, leave, state
from aclcap.cli.bench import bench
from aclcap.cli.build import build
from aclcap.cli.capture import capture
from aclcap.cli.check_meta import check_meta
from aclcap.errors import DEBUG_ENV

app = typer.Typer(
    cls=OneLineErrors,
    help="Check custom PyTorch ops for graph mode: meta impls, torch.compile tracing, "
    "device-graph capture (aclgraph / CUDA graph / AOTInductor) and benchmarks. "
    "Exit codes: 0 passed, 1 a check failed, 2 bad input or environment, 3 internal error.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


@app.callback()
def _options(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line "
                                        "errors.")] = False,
) -> None:
    state.debug = debug
    if debug:  # the workers' reasons keep C++ backtraces too (errors.summary)
        os.environ[DEBUG_ENV] = "1"
    # A bad cache budget is found before the work, not after it; a command's --help does
    # no work and answers whatever the budget.
    if not state.asks_help:
        handle_errors(max_bytes)()


app.command()(build)
app.command("check-meta")(check_meta)
app.command()(capture)
app.command()(bench)


def main() -> None:
    """Console entry point. A closed stdout met outside a command (its --help piped to
    `head`) ends as quietly as one met inside it; a command that says it is done
    (`state.done`) ends without the interpreter's teardown (_errors.leave)."""
    try:
        app()
    except BrokenPipeError:
        sys.exit(closed_pipe())
    except SystemExit as end:
        if state.done:
            leave(end.code)
        raise
