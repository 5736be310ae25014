"""Run one function on N ranks of torch.distributed: processes started by
torch.multiprocessing (forked from aclcap's server, `_forkserver.py`), a TCPStore on
loopback served by this (the parent) process, the default process group initialized in
each rank before the function runs (gloo on cpu, nccl on cuda, hccl on npu), one device
index per rank.

A rank that stops making progress is a diagnosis, not a hang: each rank arms
`faulthandler.dump_traceback_later(timeout)`, a C-level watchdog that dumps every thread's
stack and exits the rank even while it is blocked inside a collective holding the GIL, and
re-arms it at each phase it reaches, so `timeout` bounds one phase, not the whole run. The
parent reads those stacks and says which rank waits in which collective at which model
line, and which ranks finished. torch's own NCCL flight recorder and watchdog timeouts
exist for NCCL only; gloo has none, and a monitored_barrier cannot say where a rank is
inside a step, so the stack dump is written here."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from aclcap import _forkserver
from aclcap.errors import CaptureError, UsageError, first_line

DIST_BACKENDS = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}
DEFAULT_TIMEOUT_S = 120.0
_GRACE_S = 20.0  # after the ranks' own deadline: they dump and exit; then they are killed
_RUN_ENV = "ACLCAP_RANK_RUN"  # marks every process of one run (the orphan test reads it)
_watchdog: dict[str, Any] = {}  # in a rank: the stack file and timeout its watchdog uses


def _arm_watchdog() -> None:
    """(Re)start this rank's progress watchdog: progress is reaching the next phase."""
    if _watchdog:
        faulthandler.dump_traceback_later(_watchdog["timeout"], exit=True,
                                          file=_watchdog["file"])


@dataclass
class RankInfo:
    rank: int
    world_size: int
    workdir: Path
    store: Any = None  # the run's TCPStore (client side)
    _exchanges: int = 0

    def exchange(self, value: Any) -> list[Any]:
        """Every rank's `value`, by rank, through the TCPStore rather than a gloo collective:
        objects sent by all_gather_object leave Python tensors in gloo's work, whose release
        on gloo's thread needs the GIL (see settle)."""
        self._exchanges += 1
        key = f"aclcap/exchange/{self._exchanges}"
        self.store.set(f"{key}/{self.rank}", pickle.dumps(value))
        return [pickle.loads(self.store.get(f"{key}/{r}")) for r in range(self.world_size)]

    def phase(self, message: str) -> None:
        """Where this rank is (read by the parent for progress and for a diagnosis)."""
        tmp = self.workdir / f"rank{self.rank}.phase.tmp"
        tmp.write_text(message)
        tmp.replace(self.workdir / f"rank{self.rank}.phase")
        _arm_watchdog()


class RankInternalError(RuntimeError):
    """A rank hit a bug of aclcap: its first line here, its traceback in `details`."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


def _rank_error(rank: int, kind: str, message: str) -> Exception:
    """A rank's error as the exception of its exit-code class, prefixed with its rank."""
    if kind == "usage":
        return UsageError(f"rank {rank}: {message}")
    if kind == "capture":
        return CaptureError(f"rank {rank}: {message}")
    head, _, details = message.partition("\n")
    return RankInternalError(f"rank {rank}: {head}", details)


_settling = False  # set in a rank process; bench turns it off inside its timed blocks


def settle_each_call(on: bool) -> None:
    global _settling
    _settling = on


def settle(force: bool = False) -> None:
    """Before a call that holds the GIL while it waits for a collective (an AOTI artifact's
    run does): every collective issued so far completed, and gloo's threads given time to
    release their work. Gloo frees a finished work on its own thread, and freeing a tensor
    that Python has seen takes the GIL; if the main thread holds the GIL inside the artifact
    waiting for the next collective on that same thread, both wait forever (measured with gdb: a
    gloo thread in ~AsyncAllgatherCoalescedWork waiting for the GIL; 2 of 3 runs of
    tp_llama hung so before this). A no-op outside a rank."""
    if _settling or force:
        import torch.distributed as dist

        dist.barrier()
        time.sleep(0.001)  # releases the GIL: gloo's threads finish freeing earlier work


def check_nproc(nproc: int, device: str) -> None:
    """Bad input before anything starts: each rank needs a device of its own."""
    if nproc < 1:
        raise UsageError(f"--nproc {nproc}: give a number of ranks >= 1")
    if device in ("cuda", "npu"):
        present = getattr(torch, device).device_count()
        if nproc > present:
            raise UsageError(f"--nproc {nproc}: only {present} {device} device(s) here, one "
                             "per rank is needed; lower --nproc")


def _serve_store(port: int) -> Any:
    from torch.distributed import TCPStore

    try:
        return TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                        timeout=timedelta(seconds=30))
    except (RuntimeError, OSError) as exc:
        raise UsageError(f"--port {port}: cannot listen on 127.0.0.1:{port} "
                         f"({first_line(exc)}); choose a free port, or 0 for any") from exc


def _rank_main(rank: int, fn: Callable[..., Any], kwargs: dict[str, Any], nproc: int,
               device: str, port: int, workdir: str, timeout: float) -> None:
    import torch.distributed as dist

    from aclcap._quiet import silence_if_asked

    silence_if_asked()
    out = Path(workdir)
    stack = open(out / f"rank{rank}.stack", "w")  # stays open: the watchdog writes to it
    _watchdog.update(file=stack, timeout=timeout)
    _arm_watchdog()
    faulthandler.register(signal.SIGUSR1, file=stack, all_threads=True)  # the parent asks
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      **{_RUN_ENV: out.name})  # inherited by anything the rank starts
    try:
        if device != "cpu":
            getattr(torch, device).set_device(rank)
        else:  # N ranks share the cores, as vLLM's CPU workers split them
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // nproc))
        store = dist.TCPStore("127.0.0.1", port, is_master=False,
                              timeout=timedelta(seconds=timeout))
        dist.init_process_group(DIST_BACKENDS[device], store=store, rank=rank,
                                world_size=nproc, timeout=timedelta(seconds=timeout))
        settle_each_call(True)
        result: tuple = ("ok", fn(RankInfo(rank, nproc, out, store), **kwargs))
    except UsageError as exc:
        result = ("usage", str(exc))
    except CaptureError as exc:
        result = ("capture", str(exc))
    except Exception as exc:
        result = ("internal", f"{first_line(exc)}\n{traceback.format_exc()}")
    faulthandler.cancel_dump_traceback_later()
    tmp = out / f"rank{rank}.result.tmp"
    tmp.write_bytes(pickle.dumps(result))
    tmp.replace(out / f"rank{rank}.result")
    if result[0] == "ok" and dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0 if result[0] == "ok" else 1)  # no atexit hook may block on a dead peer


def _stuck_at(stack_text: str, model_file: Path | None) -> str | None:
    """From a faulthandler dump: the collective a rank waits in and its model line."""
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', stack_text)
    if not frames:
        return None
    dist_frame = next((f for f in frames if "/torch/distributed/" in f[0]
                       or "c10d" in f[2]), None)
    model = next((f for f in frames if model_file is not None
                  and Path(f[0]).resolve() == model_file.resolve()), None)
    where = f" at {Path(model[0]).name}:{model[1]}" if model else ""
    if any(f[0].endswith(str(Path("aclcap", "graph", "distributed.py"))) and f[2] in
           ("exchange", "<listcomp>") for f in frames):
        return "waits for the other ranks to exchange results (it is not inside a collective)"
    if dist_frame:
        return f"waits in {dist_frame[2]} ({Path(dist_frame[0]).name}){where}"
    return f"is busy in {frames[0][2]} ({Path(frames[0][0]).name}:{frames[0][1]}){where}"


def _diagnosis(workdir: Path, nproc: int, timeout: float, model_file: Path | None) -> str:
    parts = []
    on_peer = False  # a rank that waits for another, or raised: not slow work of its own
    for rank in range(nproc):
        stack = workdir / f"rank{rank}.stack"
        phase = workdir / f"rank{rank}.phase"
        doing = f" while {phase.read_text()}" if phase.exists() else ""
        text = stack.read_text() if stack.exists() else ""
        result = workdir / f"rank{rank}.result"
        if result.exists():
            kind, value = pickle.loads(result.read_bytes())
            parts.append(f"rank {rank} finished" if kind == "ok" else
                         f"rank {rank} raised {str(value).splitlines()[0][:160]}")
            on_peer |= kind != "ok"
        elif where := _stuck_at(text, model_file):
            on_peer |= where.startswith("waits ")
            parts.append(f"rank {rank} {where}{doing}")
        else:
            parts.append(f"rank {rank} made no progress{doing}")
    if not on_peer:  # every rank is busy in its own work: slow, not stuck on a peer
        return (f"timeout: no rank progress within --timeout {timeout:g} s, and no rank waits "
                "in a collective: " + "; ".join(parts)
                + " (a phase slower than the timeout, not a deadlock: raise --timeout)")
    return (f"deadlock: no rank progress within --timeout {timeout:g} s: " + "; ".join(parts)
            + " (ranks that issue different collectives wait for each other forever)")


def launch(fn: Callable[..., Any], kwargs: dict[str, Any], nproc: int, device: str,
           timeout: float = DEFAULT_TIMEOUT_S, port: int = 0,
           model_file: Path | None = None,
           on_phase: Callable[[str], None] | None = None) -> list[Any]:
    """`fn(RankInfo, **kwargs)` on every rank; its return values by rank. A rank that
    raises ends every rank and raises RankError prefixed with its rank; a rank that makes no
    progress within `timeout` ends every rank and raises CaptureError with the diagnosis.
    No rank process outlives this call."""
    import torch.multiprocessing as mp

    check_nproc(nproc, device)
    store = _serve_store(port)
    workdir = Path(tempfile.mkdtemp(prefix="aclcap-ranks-"))
    ctx = None
    try:
        _forkserver.context()  # ranks fork from aclcap's server, torch already imported there
        ctx = mp.start_processes(_forkserver.InThisRun(_rank_main),
                                 args=(fn, kwargs, nproc, device, store.port, str(workdir),
                                       timeout),
                                 nprocs=nproc, join=False, start_method="forkserver")
        started = time.time()
        processes = ctx.processes
        while any(p.is_alive() for p in processes):
            failed = any(p.exitcode not in (None, 0) for p in processes)
            if failed or time.time() > _last_progress(workdir, started) + timeout + _GRACE_S:
                _ask_for_stacks(processes)  # where the others are, before they are ended
                break
            if on_phase and (phase := workdir / "rank0.phase").exists():
                on_phase(phase.read_text())
            time.sleep(0.2)
        return _results(workdir, nproc, timeout, model_file)
    finally:
        if ctx is not None:
            _end(ctx.processes)
        shutil.rmtree(workdir, ignore_errors=True)
        del store


def _last_progress(workdir: Path, started: float) -> float:
    """When a rank last reached a phase (the ranks re-arm their watchdogs then too)."""
    stamps = [started]
    for phase in workdir.glob("rank*.phase"):
        with contextlib.suppress(FileNotFoundError):  # being replaced right now
            stamps.append(phase.stat().st_mtime)
    return max(stamps)


def _ask_for_stacks(processes: list) -> None:
    """Each rank still running dumps its stacks (faulthandler on SIGUSR1)."""
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGUSR1)
    if alive:
        time.sleep(1.0)


def _end(processes: list) -> None:
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()


def _results(workdir: Path, nproc: int, timeout: float, model_file: Path | None
             ) -> list[Any]:
    results: dict[int, tuple] = {}
    for rank in range(nproc):
        path = workdir / f"rank{rank}.result"
        if path.exists():
            results[rank] = pickle.loads(path.read_bytes())
    stuck = [r for r in range(nproc) if r not in results]
    stacks = [workdir / f"rank{r}.stack" for r in stuck]
    if any(p.exists() and p.read_text().startswith("Timeout") for p in stacks):
        # A rank hit its deadline: that is the cause; errors of the others followed it.
        raise CaptureError(_diagnosis(workdir, nproc, timeout, model_file))
    failed = sorted((r for r, res in results.items() if res[0] != "ok"),
                    key=lambda r: (workdir / f"rank{r}.result").stat().st_mtime_ns)
    if failed:  # the first rank that raised; the others mostly lost their peer after it
        kind, message = results[failed[0]]
        raise _rank_error(failed[0], kind, message)
    if stuck:
        raise CaptureError(f"rank {stuck[0]} ended without a result (killed, or crashed "
                           "in native code)")
    return [results[r][1] for r in range(nproc)]
