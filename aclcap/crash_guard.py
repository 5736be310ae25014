"""A command's work in a forked child, so that native code that kills the process (a
replayed kernel's segfault, an artifact that aborts as it loads) ends as one line naming
what was running, exit 1, instead of a bare "Segmentation fault" and no verdict. The child
notes each phase it enters (the progress bar's message) in a file the parent reads only
after a crash; the parent only waits. Written here because a crash must be survived by a
process that never ran the code: multiprocessing would pickle the command and re-import
torch in the child, where a fork of the parsed command costs nothing."""

from __future__ import annotations

import atexit
import faulthandler
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass

_phase_fd: int | None = None  # in the child: the file its phases go to


@dataclass(frozen=True)
class Crashed:
    """The child died of a signal while in `phase` (its last progress message)."""

    signal_name: str
    phase: str

    def line(self, command: str) -> str:
        where = f" while {self.phase}" if self.phase else ""
        return (f"{command} died of {self.signal_name}{where}: native code (a kernel, or the "
                "compiled graph replaying it) crashed the process; run that size alone "
                "(--shapes) with --debug for the Python stack at the crash")


def can_guard() -> bool:
    """A fork is safe and its output visible: this process is the command itself (stdout a
    real file, as under a test runner's in-process CLI it is not) and runs one thread."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        sys.stdout.fileno()
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def note(phase: str) -> None:
    """Record the phase the work is in (a no-op outside a guarded child)."""
    if _phase_fd is not None:
        os.ftruncate(_phase_fd, 0)
        os.pwrite(_phase_fd, phase.encode(errors="replace"), 0)


def run_guarded(work: Callable[[], int], debug: bool = False) -> int | Crashed:
    """`work()`'s exit code, run in a forked child; Crashed where the child died of a
    signal other than Ctrl-C's or a kill's (130 and 143 then). With `debug`, the child
    prints the Python stack at a crash (faulthandler)."""
    global _phase_fd
    handle, path = tempfile.mkstemp(prefix="aclcap-phase-")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the whole command, then out without the parent's exit hooks
        _phase_fd = handle
        if debug:
            faulthandler.enable()
        code = 3
        try:
            code = work()
        finally:
            # The exit hooks run (the fork server's end, torch's own), then out without the
            # interpreter's teardown of every module, which only the parent still needs.
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    # Ctrl-C reaches the child from the terminal: it ends the work; a kill sent to this
    # process alone is passed on, so no child outlives it.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), \
        signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGTERM))
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
        with os.fdopen(handle, "rb") as f:
            phase = f.read().decode(errors="replace").strip()
        os.unlink(path)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    number = os.WTERMSIG(status)
    if number in (signal.SIGINT, signal.SIGTERM):  # stopped, not crashed: the shell's code
        return 128 + number
    return Crashed(signal.Signals(number).name, phase)
