"""check-meta: list every op of the namespaces and check its meta impl. Real kernels run in
a worker process (metaworker.py) so that a segfault or a hang costs one op, not the run."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aclcap.libload import load_libraries
from aclcap.metaworker import RESULT_FD_ENV
from aclcap.registry import MISSING, OpInfo, list_ops

STATUSES = ("pass", "missing", "fail", "crashed", "timeout", "not_exercised")
WORKER_START_TIMEOUT_S = 300.0  # importing torch and loading libraries, on a slow CI box


@dataclass
class MetaResult:
    """One row of the check-meta table and of its JSON (../shared/README.md section 3)."""

    op: str
    schema: str
    kernels: list[str]
    meta_source: str
    status: str
    reasons: list[str] = field(default_factory=list)


@dataclass
class MetaReport:
    results: list[MetaResult]
    namespaces: list[str]
    ops: list[OpInfo] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    def summary(self) -> str:
        broken = self.count("fail") + self.count("crashed") + self.count("timeout")
        return (f"{len(self.results)} ops: {self.count('pass')} pass, "
                f"{self.count('missing')} missing meta, {broken} failing, "
                f"{self.count('not_exercised')} not exercised")

    @property
    def exit_code(self) -> int:
        return 1 if any(r.status in ("missing", "fail", "crashed", "timeout")
                        for r in self.results) else 0

    def rows(self) -> list[dict]:
        return [asdict(r) for r in self.results]


def _lib_arg(spec: str) -> str:
    """Paths travel to the worker absolute, module names as they are."""
    path = Path(spec)
    return str(path.resolve()) if path.exists() else spec


_DISPATCH_KEY = {"cpu": "CPU", "cuda": "CUDA", "npu": "PrivateUse1"}


def _has_kernel_for(op: OpInfo, device: str) -> bool:
    return _DISPATCH_KEY[device] in op.kernels or bool(
        {"CompositeExplicitAutograd", "CompositeImplicitAutograd"} & set(op.kernels))


class _Worker:
    """One worker process and the line protocol on its result pipe."""

    def __init__(self, request: dict) -> None:
        read_fd, write_fd = os.pipe()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aclcap.metaworker"],
            stdin=subprocess.PIPE, stdout=self.log, stderr=self.log,
            pass_fds=(write_fd,), env={**os.environ, RESULT_FD_ENV: str(write_fd)},
            start_new_session=True,
        )
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode())
        self.proc.stdin.close()

    def next_event(self, timeout_s: float) -> dict | None:
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
        return json.loads(line)

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


def run_checks(
    ops: list[OpInfo],
    libs: list[str],
    device: str,
    timeout_s: float,
    strict: bool,
    dtypes: list[str],
    on_done: Callable[[str], None] | None = None,
) -> dict[str, tuple[str, list[str]]]:
    """qualname -> (status, reasons) for each op, restarting the worker past a crash."""
    results: dict[str, tuple[str, list[str]]] = {}
    pending = [{"qualname": o.qualname, "meta_kind": o.meta_kind,
                "device": device if _has_kernel_for(o, device) else "cpu"} for o in ops]
    while pending:
        request = {"libs": [_lib_arg(s) for s in libs], "ops": pending,
                   "strict": strict, "dtypes": dtypes}
        worker = _Worker(request)
        try:
            try:
                ready = worker.next_event(WORKER_START_TIMEOUT_S)
            except TimeoutError:
                ready = None
            if ready is None:
                reason = f"check-meta worker failed to start: {worker.death()}"
                for op in pending:
                    results[op["qualname"]] = ("crashed", [reason])
                return results
            current = None
            while pending:
                try:
                    event = worker.next_event(timeout_s if current else WORKER_START_TIMEOUT_S)
                except TimeoutError:
                    event = {"event": "timeout"}
                if event is None and current is None:  # died between ops: blame them all
                    reason = worker.death()
                    for op in pending:
                        results[op["qualname"]] = ("crashed", [reason])
                    return results
                if event is None or event["event"] == "timeout":
                    status = "timeout" if event else "crashed"
                    reason = f"timed out ({timeout_s:g} s)" if event else worker.death()
                    results[current] = (status, [reason])
                    pending = [p for p in pending if p["qualname"] != current]
                    if on_done:
                        on_done(current)
                    break
                if event["event"] == "start":
                    current = event["op"]
                elif event["event"] == "result":
                    results[event["op"]] = (event["status"], event["reasons"])
                    pending = [p for p in pending if p["qualname"] != event["op"]]
                    current = None
                    if on_done:
                        on_done(event["op"])
        finally:
            worker.close()
    return results


def check_meta(
    libs: list[str],
    namespaces: list[str] | None = None,
    device: str = "cpu",
    timeout_s: float = 60.0,
    strict: bool = False,
    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[str], None] | None = None,
) -> MetaReport:
    """Load `libs`, list the ops of `namespaces` (default: those the libraries registered),
    and check each; ops with samples run in the worker, the others are only inspected."""
    added = load_libraries(libs)
    namespaces = namespaces or added
    ops = list_ops(namespaces)
    exercised = [o for o in ops if o.has_samples and o.meta_kind != MISSING]
    if on_start:
        on_start(len(exercised))
    checked = run_checks(exercised, libs, device, timeout_s, strict, list(dtypes), on_done)
    results = []
    for o in ops:
        if o.meta_kind == MISSING:
            status, reasons = "missing", [
                "no meta impl: torch.compile graph-breaks here; `aclcap check-meta "
                "--emit-stubs FILE` writes a register_fake to start from"]
        elif not o.has_samples:
            status, reasons = "not_exercised", [
                "no sample inputs: declare them with @aclcap.samples to run the checks"]
        else:
            status, reasons = checked[o.qualname]
            if not _has_kernel_for(o, device):
                reasons = [f"warning: no {device} kernel: exercised on cpu", *reasons]
        results.append(MetaResult(o.qualname, o.schema, o.kernels, o.meta_source, status,
                                  reasons))
    return MetaReport(results, namespaces, ops)
