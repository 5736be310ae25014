"""The worker process of check-meta: loads the op libraries, runs each op's checks and
reports one JSON event per message on its result pipe. A kernel that segfaults or hangs
takes only this process down; the parent notes it and starts another."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aclcap.meta.messages import OpRequest, WorkerRequest


def _declared_samples(qualname: str, device: str, dtypes: list[Any]) -> Iterator[Any]:
    """The op library's own @aclcap.samples, once per dtype."""
    import torch

    from aclcap.meta.sample_inputs import samples_for, seed_all

    make = samples_for(qualname)
    if make is None:
        return
    seed_all()  # the same samples in every run and worker, whatever ran before
    for dtype in dtypes:
        yield from make(torch.device(device), dtype)


def _handed(request: WorkerRequest, pipe: Connection) -> Iterator[OpRequest]:
    """The request's ops in order, or, pulled, each op whose name the parent sends, until
    an empty name."""
    if not request.pulled:
        yield from request.ops
        return
    by_name = {op.qualname: op for op in request.ops}
    while name := pipe.recv_bytes().decode():
        yield by_name[name]


def serve(request_json: str, out: Connection, log: str) -> None:
    """A worker's life, forked from the worker server (_process.py) in the parent run's
    environment and directory (_forkserver.InThisRun): its own session (so the parent ends
    it and whatever it starts at once), its output into `log`, then the request."""
    os.setsid()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)

    from aclcap.meta.messages import (
        CheckStart,
        Error,
        Ready,
        Result,
        Start,
        WorkerRequest,
        event_line,
    )

    def emit(event: Any) -> None:
        out.send_bytes(event_line(event).encode())

    request = WorkerRequest.from_json(request_json)
    import torch

    from aclcap._compat import skip_guard_latency_profile
    from aclcap.errors import UsageError, first_line
    from aclcap.loading.libraries import load_libraries
    from aclcap.loading.model_file import load_model_file
    from aclcap.meta.checks import check_op
    from aclcap.meta.harvest import harvest, harvest_recorder, samples_of
    from aclcap.meta.sample_inputs import declared_words
    from aclcap.status import Finding, Status

    skip_guard_latency_profile()  # a metric's: up to a quarter of each compile (_compat.py)
    if request.threads:  # the cores shared among the workers side by side (runner.py)
        torch.set_num_threads(min(request.threads, torch.get_num_threads()))
    dtypes = [getattr(torch, name) for name in request.dtypes]
    recorder = harvest_recorder(set(request.namespaces))

    def failed(label: str, call: Any) -> bool:
        """Run one start-up step; bad input (a library's, a model file's own error) is
        named in the Error the parent reports."""
        try:
            call()
        except Exception as exc:
            emit(Error(label + (str(exc) if isinstance(exc, UsageError) else first_line(exc))))
            return True
        return False

    # What a model file's import loads (its op library, a plugin package that registers its
    # namespaces, as vllm_ascend's does) comes before the libraries: a fakes file among them
    # registers on ops that must exist by then.
    models = request.samples_from
    if any(failed(f"--samples-from {m}: ", lambda m=m: load_model_file(m)) for m in models) \
            or failed("", lambda: load_libraries(request.libs)) \
            or any(failed(f"--samples-from {m}: ", lambda m=m: harvest(
                m, request.shapes, request.device, torch.float32, recorder)) for m in models):
        return
    emit(Ready())
    if request.mode != "check":
        from aclcap.meta.synthesize.worker_side import synthesis_events

        for event in synthesis_events(request, recorder.records, emit):
            emit(event)
        return
    for op in _handed(request, out):
        emit(Start(op.qualname))
        started = time.perf_counter()
        try:
            declared = list(_declared_samples(op.qualname, op.device, dtypes))
            from_model, sites = samples_of(recorder.records, op.qualname)
            sources = ([declared_words(len(declared), len(dtypes))] if declared else []) + (
                [f"{len(from_model)} from {', '.join(sites)}"] if from_model else [])
            outcome = check_op(op.qualname, [*declared, *from_model], meta_kind=op.meta_kind,
                               meta_source=op.meta_source, strict=request.strict,
                               on_check=lambda name, op=op: emit(CheckStart(op.qualname, name)))
            emit(Result(op.qualname, outcome.status, outcome.findings, outcome.sample_count,
                        sources, outcome.data_dependent,
                        check_s=round(time.perf_counter() - started, 3)))
        except Exception as exc:  # a check that raises fails that op, not the run
            emit(Result(op.qualname, Status.FAIL, [Finding(f"check raised {first_line(exc)}")]))

