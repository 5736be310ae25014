"""The worker process of check-meta: loads the op libraries, runs each op's checks and
reports one JSON line per event on the fd named by ACLCAP_RESULT_FD. A kernel that
segfaults or hangs takes only this process down; the parent notes it and starts another."""

from __future__ import annotations

import json
import os
import sys
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

    def emit(**event: object) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    request = json.loads(sys.stdin.read())
    import torch

    from aclcap.errors import first_line
    from aclcap.loading.libraries import load_libraries
    from aclcap.meta.checks import check_op
    from aclcap.meta.harvest import Harvested, harvest

    load_libraries(request["libs"])
    dtypes = [getattr(torch, name) for name in request["dtypes"]]
    harvested = Harvested()
    for model in request["samples_from"]:
        try:
            harvest(model, request["shapes"], set(request["namespaces"]), request["device"],
                    torch.float32, harvested)
        except Exception as exc:  # the model file's own error: bad input, named
            emit(event="error", message=f"--samples-from {model}: {first_line(exc)}")
            return
    emit(event="ready")
    for op in request["ops"]:
        emit(event="start", op=op["qualname"])
        try:
            declared = list(_declared_samples(op["qualname"], op["device"], dtypes))
            from_model = harvested.samples.get(op["qualname"], [])
            sources = ([f"{len(declared)} declared"] if declared else []) + (
                [f"{len(from_model)} from {', '.join(harvested.sites[op['qualname']])}"]
                if from_model else [])
            outcome = check_op(op["qualname"], op["meta_kind"], [*declared, *from_model],
                               request["strict"], op["meta_source"])
            emit(event="result", op=op["qualname"], status=str(outcome.status),
                 findings=[[f.message, str(f.severity)] for f in outcome.findings],
                 sample_count=outcome.sample_count, sample_sources=sources)
        except Exception as exc:  # a check that raises fails that op, not the run
            emit(event="result", op=op["qualname"], status="fail",
                 findings=[[f"check raised {first_line(exc)}", "error"]], sample_count=0,
                 sample_sources=[])


if __name__ == "__main__":
    main()
