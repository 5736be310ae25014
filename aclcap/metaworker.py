"""The worker process of check-meta: loads the op libraries, runs each op's checks and
reports one JSON line per event on the fd named by ACLCAP_RESULT_FD. A kernel that
segfaults or hangs takes only this process down; the parent notes it and starts another."""

from __future__ import annotations

import json
import os
import sys

RESULT_FD_ENV = "ACLCAP_RESULT_FD"


def main() -> None:
    out = os.fdopen(int(os.environ[RESULT_FD_ENV]), "w", buffering=1)

    def emit(**event: object) -> None:
        out.write(json.dumps(event) + "\n")
        out.flush()

    request = json.loads(sys.stdin.read())
    import torch

    from aclcap.errors import first_line
    from aclcap.libload import load_libraries
    from aclcap.metachecks import check_op

    load_libraries(request["libs"])
    dtypes = [getattr(torch, name) for name in request["dtypes"]]
    emit(event="ready")
    for op in request["ops"]:
        emit(event="start", op=op["qualname"])
        try:
            outcome = check_op(op["qualname"], op["meta_kind"], op["device"], dtypes,
                               request["strict"])
            emit(event="result", op=op["qualname"], status=outcome.status,
                 reasons=outcome.reasons, samples=outcome.samples)
        except Exception as exc:  # a check that raises fails that op, not the run
            emit(event="result", op=op["qualname"], status="fail",
                 reasons=[f"check raised {first_line(exc)}"], samples=0)


if __name__ == "__main__":
    main()
