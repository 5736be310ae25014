"""The one process that aclcap's child processes are forked from (multiprocessing's
forkserver): a fresh, single-threaded process that has imported torch, Dynamo and the
checks once, so a check-meta worker or a `--nproc` rank starts in milliseconds instead of
the seconds those imports take (a synthesis run starts up to eight workers, each test of
the suite's TP runs two ranks). One server per aclcap process, shared by both: its
preload list is read once, when it starts, so every user passes this one. It is never the
parent, whose progress bars and threads make forking the parent itself unsafe."""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import forkserver
from typing import Any

# torch, Dynamo and the checks, loaded by _preload.py with the garbage collector off (1.8 to
# 2.0 s of CPU time on the 2-core CI machine, 2.4 to 2.8 s with it on). `__main__` too, else
# each child runs the main script again (as multiprocessing does for a script, which the
# console script's `if __name__ == "__main__"` keeps cheap; Python 3.11's server is never
# told the script's path, so its children do run the script's imports, about 0.1 s).
PRELOAD = ["__main__", "aclcap._preload"]


def context() -> multiprocessing.context.BaseContext:
    """The forkserver context, its preload set before the server's first use."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start() -> None:
    """Start the server now, without waiting for its imports: they run on another core
    while this process imports torch and loads the op libraries, instead of after."""
    context()
    forkserver.ensure_running()
    atexit.unregister(_end_server)  # once, however many runs this process makes
    atexit.register(_end_server)


def _end_server() -> None:
    """A run that ends early (a library that fails to load is found after the start) ends
    its server too: one still importing would hold the run's stdout and stderr open for
    seconds, and whoever reads them (CI, a pipe) would wait that long for the error. The
    pid is multiprocessing's own record (no public accessor); every child is ended by now."""
    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@dataclass
class InThisRun:
    """A child's target that first takes the environment and directory of the run that
    made it (read here, in the parent): the server keeps those of the first run in this
    process, and an in-process CLI run sets its own variables."""

    fn: Callable[..., Any]
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: str = field(default_factory=os.getcwd)

    def __call__(self, *args: Any) -> Any:
        os.environ.clear()
        os.environ.update(self.env)
        os.chdir(self.cwd)
        _thread_lock_for_tqdm()
        return self.fn(*args)


def _thread_lock_for_tqdm() -> None:
    """tqdm (torch.fx's interpreter makes a bar) otherwise makes a multiprocessing lock, a
    named semaphore; a child ended with SIGKILL never releases it, and multiprocessing's
    resource tracker then warns of a leak after aclcap's last line. A child is one process:
    a thread lock serves."""
    try:
        from tqdm import tqdm
    except ImportError:
        return
    tqdm.set_lock(threading.RLock())
