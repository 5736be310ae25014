"""Exceptions -> one-line messages and exit codes, in one table for every command (the
README's exit-code contract): the same failure gets the same code wherever it happens."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from aclcap.errors import CaptureError, UsageError, first_line

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_EXIT_CODES: tuple[tuple[type[BaseException], int, str], ...] = (
    (UsageError, EXIT_BAD_INPUT, "error"),
    (CaptureError, EXIT_FAILED, "capture failed"),
)

err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


class _State:
    debug = False  # --debug: tracebacks instead of one-line errors


state = _State()


def handle_errors(command: F) -> F:
    """Run a command with the exception table applied; --debug re-raises for the traceback."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if state.debug:
                raise
            for kind, code, label in _EXIT_CODES:
                if isinstance(exc, kind):
                    # The message is text, never markup: torch's say "[/path/pair.cc:553]".
                    err_console.print(f"[red]{label}:[/] {escape(str(exc))}", highlight=False,
                                      soft_wrap=True)
                    raise typer.Exit(code) from None
            err_console.print(f"[red]internal error:[/] {escape(first_line(exc))} (a bug of "
                              "aclcap: rerun with --debug for the traceback)", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(EXIT_INTERNAL) from None

    return run  # type: ignore[return-value]
