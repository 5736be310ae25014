"""The check-meta worker as a child process, and the event protocol on its result pipe: the
parent reads one JSON event at a time with a deadline, so a hang becomes a timeout and a
segfault an end of file, never a stuck or crashed parent.

Workers are forked from one server process per aclcap process (multiprocessing's
forkserver) that has imported torch, Dynamo and the checks once: a worker then starts in
milliseconds instead of the seconds those imports take, and a synthesis run starts up to
eight of them. The server is a fresh, single-threaded process, never the parent, whose
progress bars and worker threads make forking it unsafe. A worker still loads the op
libraries itself, so a library that crashes on load takes only that worker down."""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
from pathlib import Path

from aclcap.meta.messages import Event, WorkerRequest, parse_event
from aclcap.meta.worker import serve

# What every worker imports before its first op (about 2.7 s of CPU time on this machine);
# `__main__` too, else each worker runs the main script again (as multiprocessing does for
# a script, which the console script's `if __name__ == "__main__"` keeps cheap).
PRELOAD = ["__main__", "torch", "torch._dynamo", "torch._functorch.aot_autograd",
           "aclcap.meta.checks", "aclcap.meta.worker"]


def _context() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # read when the server starts, on first use
    return context


class WorkerProcess:
    """One worker process and the event protocol on its result pipe."""

    def __init__(self, request: WorkerRequest) -> None:
        context = _context()
        self.conn, child_end = context.Pipe(duplex=False)
        log = tempfile.NamedTemporaryFile(prefix="aclcap-worker-", suffix=".log", delete=False)
        log.close()
        self.log = Path(log.name)
        # The server keeps the environment and directory of the first run in this process:
        # each worker takes this run's own (in-process CLI runs set their own variables).
        self.proc = context.Process(
            target=serve, args=(request.to_json(), child_end, str(self.log), dict(os.environ),
                                os.getcwd()), name="aclcap-check-meta-worker")
        self.proc.start()
        child_end.close()

    def next_event(self, timeout_s: float) -> Event | None:
        """The next event; None on EOF (the worker died). TimeoutError past the deadline."""
        if not self.conn.poll(timeout_s):
            raise TimeoutError
        try:
            return parse_event(self.conn.recv_bytes())
        except EOFError:
            return None

    def death(self) -> str:
        """Why the worker ended, as the op's status text."""
        self.proc.join()
        code = self.proc.exitcode or 0
        if code < 0:
            return f"crashed (signal {-code}: {signal.Signals(-code).name})"
        text = self.log.read_text(errors="replace")
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return f"crashed (exit code {code}): {lines[-1] if lines else 'no output'}"

    def kill(self) -> None:
        """The worker and anything it started (its own session: see worker.serve)."""
        if self.proc.is_alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # not yet its own session leader
                self.proc.kill()
        self.proc.join()

    def close(self) -> None:
        self.kill()
        self.conn.close()
        self.proc.close()
        self.log.unlink(missing_ok=True)
