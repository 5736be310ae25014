"""The worker process of check-meta: loads the op libraries, runs each op's checks and
reports one JSON line per event on the fd named by ACLCAP_RESULT_FD. A kernel that
segfaults or hangs takes only this process down; the parent notes it and starts another."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

RESULT_FD_ENV = "ACLCAP_RESULT_FD"


def _declared_samples(qualname: str, device: str, dtypes: list[Any]) -> Iterator[Any]:
    """The op library's own @aclcap.samples, once per dtype."""
    import torch

    from aclcap.meta.sample_inputs import samples_for

    make = samples_for(qualname)
    if make is None:
        return
    for dtype in dtypes:
        yield from make(torch.device(device), dtype)


def main() -> None:
    out = os.fdopen(int(os.environ[RESULT_FD_ENV]), "w", buffering=1)

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
        out.write(event_line(event) + "\n")
        out.flush()

    request = WorkerRequest.from_json(sys.stdin.read())
    import torch

    from aclcap.errors import first_line
    from aclcap.loading.libraries import load_libraries
    from aclcap.meta.checks import check_op
    from aclcap.meta.harvest import harvest, harvest_recorder, samples_of
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

        for event in synthesis_events(request, recorder.records):
            emit(event)
        return
    for op in request.ops:
        emit(Start(op.qualname))
        started = time.perf_counter()
        try:
            declared = list(_declared_samples(op.qualname, op.device, dtypes))
            from_model, sites = samples_of(recorder.records, op.qualname)
            sources = ([f"{len(declared)} declared"] if declared else []) + (
                [f"{len(from_model)} from {', '.join(sites)}"] if from_model else [])
            outcome = check_op(op.qualname, [*declared, *from_model], meta_kind=op.meta_kind,
                               meta_source=op.meta_source, strict=request.strict,
                               on_check=lambda name, op=op: emit(CheckStart(op.qualname, name)))
            emit(Result(op.qualname, outcome.status, outcome.findings, outcome.sample_count,
                        sources, outcome.data_dependent,
                        check_s=round(time.perf_counter() - started, 3)))
        except Exception as exc:  # a check that raises fails that op, not the run
            emit(Result(op.qualname, Status.FAIL, [Finding(f"check raised {first_line(exc)}")]))


if __name__ == "__main__":
    main()
