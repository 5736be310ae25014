"""Exceptions -> one-line messages and exit codes, in one table for every command (the
exit-code contract of docs/contracts.md): the same failure gets the same code wherever it
happens, with or without --debug, which only adds the traceback."""

from __future__ import annotations

import atexit
import functools
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import typer
import typer.core
from rich.console import Console
from rich.markup import escape

# typer vendors click; its exceptions are the ones its parser raises (typer re-exports only
# BadParameter), so the option-parsing errors are caught here by their own classes.
from typer._click.exceptions import ClickException, NoArgsIsHelpError

from aclcap.crash_guard import Crashed, can_guard, run_guarded
from aclcap.errors import CaptureError, UsageError, error_line, first_line

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# A closed stdout: 1, as Python exits on EPIPE (its documented recipe) and rich's consoles do.
EXIT_CLOSED_PIPE = 1
_EXIT_CODES: tuple[tuple[type[BaseException], int, str], ...] = (
    (UsageError, EXIT_BAD_INPUT, "error"),
    (CaptureError, EXIT_FAILED, "capture failed"),
)

err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


class _State:
    debug = False  # --debug: the traceback too, before the one-line error
    # --help anywhere: the group's callback runs before a command parses its own --help
    asks_help = False
    # the command's work and output are done: the console script leaves at once (leave)
    done = False


state = _State()


def exit_code_of(exc: BaseException) -> tuple[int, str]:
    """The exit code and label of an exception, from its type alone (3: aclcap's own bug)."""
    for kind, code, label in _EXIT_CODES:
        if isinstance(exc, kind):
            return code, label
    return EXIT_INTERNAL, "internal error"


def print_error(label: str, message: str) -> None:
    """The one error-line format: `label: message`, one line, never markup (torch's
    messages say "[/path/pair.cc:553]")."""
    err_console.print(f"[red]{label}:[/] {escape(error_line(message))}", highlight=False,
                      soft_wrap=True)


def closed_pipe() -> int:
    """Stdout's reader is gone (`aclcap ... | head -1`): end quietly, as `cat` does. Stdout
    points at /dev/null from here, so the interpreter's last flush at exit cannot fail
    again (Python's documented recipe for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_CLOSED_PIPE


def leave(code: int | str | None) -> NoReturn:
    """End the process now, as a command whose work and output are done may: atexit's
    handlers run (the fork server is ended) and the output is flushed, but not the
    interpreter's teardown, which frees every object torch and the op libraries made, one
    by one: 0.4 to 0.55 s of a cold check-meta's 5.5 s on
    the 2-core CI machine (a bare `import torch` spends 0.45 s of its 1.5 s there)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone or a stream closed: nothing to keep
            pass
    os._exit(code if isinstance(code, int) else EXIT_OK if code is None else EXIT_FAILED)


def handle_errors(command: F) -> F:
    """Run a command with the exception table applied; --debug prints the traceback first
    and exits with the same code."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            raise typer.Exit(closed_pipe()) from None
        except Exception as exc:
            if state.debug:
                sys.stderr.write(traceback.format_exc())
            code, label = exit_code_of(exc)
            if code == EXIT_INTERNAL:
                hint = "the traceback is above" if state.debug else \
                    "rerun with --debug for the traceback"
                print_error(label, f"{first_line(exc)} (a bug of aclcap: {hint})")
            else:
                print_error(label, str(exc))
            raise typer.Exit(code) from None

    return run  # type: ignore[return-value]


def handle_crashes(command: F) -> F:
    """handle_errors, in a forked child where this process is the command itself
    (crash_guard): a crash in native code (a replayed kernel's segfault) is one line
    naming the phase it happened in, exit 1, never a bare "Segmentation fault"."""
    inner = handle_errors(command)

    def exit_code(args: tuple, kwargs: dict) -> int:
        try:
            inner(*args, **kwargs)
        except typer.Exit as exc:
            return exc.exit_code
        return EXIT_OK

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not can_guard():
            return inner(*args, **kwargs)
        outcome = run_guarded(lambda: exit_code(args, kwargs), state.debug)
        if isinstance(outcome, Crashed):
            print_error("crashed", outcome.line(f"aclcap {command.__name__}"))
            raise typer.Exit(EXIT_FAILED)
        raise typer.Exit(outcome)

    return run  # type: ignore[return-value]


class OneLineErrors(typer.core.TyperGroup):
    """typer's group whose option-parsing errors (a value out of range, an unknown option)
    are one line in the project's format, exit 2, instead of rich's usage panel: the same
    line whether the CLI runs as a script or under typer's CliRunner."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        state.asks_help = "--help" in (sys.argv[1:] if args is None else args)
        state.done = False
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as exc:  # `aclcap` alone: the help, as before
            if not standalone_mode:
                raise
            err_console.print(exc.ctx.get_help())
            sys.exit(EXIT_BAD_INPUT)
        except ClickException as exc:
            if not standalone_mode:
                raise
            command = exc.ctx.command_path if getattr(exc, "ctx", None) else "aclcap"
            print_error("error", f"{exc.format_message()} (see `{command} --help`)")
            sys.exit(EXIT_BAD_INPUT)
        except typer.Abort:
            if not standalone_mode:
                raise
            err_console.print("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        if standalone_mode:  # non-standalone main returns the code of a typer.Exit
            sys.exit(result if isinstance(result, int) else EXIT_OK)
        return result
