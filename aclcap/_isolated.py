"""Run one function in a child process forked from aclcap's server (`_forkserver`), and get
its return value, or why the child died: a C++ library that aborts while it loads (a
c10::Error thrown from a static initializer ends the process) costs that child, never
aclcap. Used where synthesis loads code it wrote itself or a library it probes; and
(`run_forked`) a child of the calling process itself, for a kernel that corrupts memory."""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aclcap import _forkserver


class ChildDied(RuntimeError):
    """The child crashed, hung past its deadline, or raised: the message says which, with
    the last lines it printed (where a C++ abort writes its reason)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


def _child(fn: Callable[..., Any], args: tuple, conn: Any, log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    conn.send(_outcome(fn, *args))


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple:
    """What a child sends its parent: `("ok", result)`, or `("error", why, traceback)`."""
    try:
        return ("ok", fn(*args))
    except BaseException as exc:  # everything, SystemExit too, goes back to the parent
        return ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())


def _answer(answer: tuple) -> Any:
    """The child's result, or ChildDied with its reason and traceback."""
    if answer[0] == "error":
        raise ChildDied(answer[1], answer[2])
    return answer[1]


def run_isolated(fn: Callable[..., Any], *args: Any, timeout_s: float = 600.0) -> Any:
    """`fn(*args)` in a forked child (fn and its result must pickle); ChildDied where it
    raises, crashes or outlasts `timeout_s`."""
    context = _forkserver.context()
    parent_end, child_end = context.Pipe(duplex=False)
    handle, log = tempfile.mkstemp(prefix="aclcap-child-", suffix=".log")
    os.close(handle)
    proc = context.Process(target=_forkserver.InThisRun(_child),
                           args=(fn, args, child_end, log), name="aclcap-isolated")
    try:
        proc.start()
        child_end.close()
        if not parent_end.poll(timeout_s):
            proc.kill()
            raise ChildDied(f"timed out after {timeout_s:g} s", _tail(log))
        try:
            answer = parent_end.recv()
        except EOFError:
            proc.join()
            output = _tail(log)
            lines = [ln for ln in output.splitlines() if ln.strip()]
            raise ChildDied(exit_words(proc.exitcode, lines[-1] if lines else ""),
                            output) from None
        return _answer(answer)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent_end.close()
        Path(log).unlink(missing_ok=True)


def run_forked(fn: Callable[[], Any]) -> Any:
    """`fn()` in a child forked from this very process (its loaded libraries and tensors as
    they are: the fork server's fresh state would not have them), its result pickled back;
    ChildDied where it crashes or raises. What a kernel corrupts past the memory it
    allocated dies with the child, so the next call runs on a clean heap."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into the caller's loop, nor its exit hooks
        os.close(read)
        faulthandler.disable()  # its crash is the parent's to name, in one line
        try:
            payload = pickle.dumps(_outcome(fn))
        except BaseException as exc:  # a result that does not pickle
            payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}", ""))
        with os.fdopen(write, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        data = got.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not data:
        raise ChildDied(exit_words(-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                                   else os.WEXITSTATUS(status)))
    return _answer(pickle.loads(data))


def exit_words(code: int | None, last_line: str = "") -> str:
    """How a child ended, as every report says it: `crashed (signal 6: SIGABRT)`, or
    `crashed (exit code 1): <its last line>`."""
    if code is not None and code < 0:
        return f"crashed (signal {-code}: {signal.Signals(-code).name})"
    return f"crashed (exit code {code}): {last_line or 'no output'}"


def _tail(log: str, limit: int = 4000) -> str:
    try:
        return Path(log).read_text(errors="replace")[-limit:]
    except OSError:
        return ""
