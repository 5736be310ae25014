"""The check-meta worker as a child process, and the line protocol on its result pipe: the
parent reads one JSON event at a time with a deadline, so a hang becomes a timeout and a
segfault an end of file, never a stuck or crashed parent."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time

from aclcap.meta.messages import Event, WorkerRequest, parse_event
from aclcap.meta.worker import RESULT_FD_ENV


class WorkerProcess:
    """One worker process and the line protocol on its result pipe."""

    def __init__(self, request: WorkerRequest) -> None:
        read_fd, write_fd = os.pipe()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aclcap.meta.worker"],
            stdin=subprocess.PIPE, stdout=self.log, stderr=self.log,
            pass_fds=(write_fd,), env={**os.environ, RESULT_FD_ENV: str(write_fd)},
            start_new_session=True,
        )
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        assert self.proc.stdin is not None
        self.proc.stdin.write(request.to_json().encode())
        self.proc.stdin.close()

    def next_event(self, timeout_s: float) -> Event | None:
        """The next event; None on EOF (the worker died). TimeoutError past the deadline."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return parse_event(line)

    def death(self) -> str:
        """Why the worker ended, as the op's status text."""
        code = self.proc.wait()
        if code < 0:
            return f"crashed (signal {-code}: {signal.Signals(-code).name})"
        self.log.seek(0)
        lines = [ln for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        return f"crashed (exit code {code}): {lines[-1] if lines else 'no output'}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        self.kill()
        os.close(self.fd)
        self.log.close()
