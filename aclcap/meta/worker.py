"""The worker process of check-meta: loads the op libraries, runs each op's checks and
reports one JSON event per message on its result pipe. A kernel that segfaults or hangs
takes only this process down; the parent notes it and starts another."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any


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

    from aclcap.errors import first_line
    from aclcap.loading.libraries import load_libraries
    from aclcap.meta.checks import check_op
    from aclcap.meta.harvest import harvest, harvest_recorder, samples_of
    from aclcap.meta.sample_inputs import declared_words
    from aclcap.status import Finding, Status

    load_libraries(request.libs)
    dtypes = [getattr(torch, name) for name in request.dtypes]
    recorder = harvest_recorder(set(request.namespaces))
    for model in request.samples_from:
        try:
            harvest(model, request.shapes, request.device, torch.float32, recorder)
        except Exception as exc:  # the model file's own error: bad input, named
            emit(Error(f"--samples-from {model}: {first_line(exc)}"))
            return
    emit(Ready())
    if request.mode != "check":
        from aclcap.meta.synthesize.worker_side import synthesis_events

        for event in synthesis_events(request, recorder.records, emit):
            emit(event)
        return
    for op in request.ops:
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

