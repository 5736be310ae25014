"""The check-meta worker as a child process, and the event protocol on its result pipe: the
parent reads one JSON event at a time with a deadline, so a hang becomes a timeout and a
segfault an end of file, never a stuck or crashed parent.

Workers are forked from aclcap's one server process (`aclcap._forkserver`). A worker still
loads the op libraries itself, so a library that crashes on load takes only that worker
down."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

from aclcap import _forkserver
from aclcap._isolated import exit_words
from aclcap.meta.messages import Event, WorkerRequest, parse_event
from aclcap.meta.worker import serve


class WorkerProcess:
    """One worker process and the event protocol on its result pipe."""

    def __init__(self, request: WorkerRequest) -> None:
        context = _forkserver.context()
        self.conn, child_end = context.Pipe()  # events up, a pulled worker's ops down
        log = tempfile.NamedTemporaryFile(prefix="aclcap-worker-", suffix=".log", delete=False)
        log.close()
        self.log = Path(log.name)
        self.proc = context.Process(
            target=_forkserver.InThisRun(serve),
            args=(request.to_json(), child_end, str(self.log)), name="aclcap-check-meta-worker")
        self.proc.start()
        child_end.close()

    def hand(self, op: str) -> None:
        """A pulled worker's next op ("": no more). One already dead is found by the next
        read (an end of file)."""
        try:
            self.conn.send_bytes(op.encode())
        except OSError:
            pass

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
            return exit_words(code)
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        return exit_words(code, lines[-1] if lines else "")

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
