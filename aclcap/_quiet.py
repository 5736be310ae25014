"""torch's log noise off: torch.compile logs every graph break as a warning and torch.export
dumps the graph on failure, while the reports list each once. Rank processes inherit the
choice through ACLCAP_QUIET."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator

QUIET_ENV = "ACLCAP_QUIET"


def silence_torch() -> None:
    from aclcap._compat import set_logs

    os.environ[QUIET_ENV] = "1"
    set_logs(dynamo=logging.ERROR, inductor=logging.ERROR, export=logging.CRITICAL)
    # Dynamo logs each guard it fails to build, with the whole guard and a stack, at ERROR
    # from torch._guards (outside the dynamo log set): the report names the failure once
    logging.getLogger("torch._guards").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")


def silence_if_asked() -> None:
    """In a rank process: silence torch as its parent did."""
    if os.environ.get(QUIET_ENV) == "1":
        silence_torch()


# Kineto prints a status line on every profiler start and stop ("USDT:... profiler_start",
# "STAGE:... Completed Stage") from C++ straight to fd 2, and no log level turns them off
# (KINETO_LOG_LEVEL leaves the USDT ones): --profile starts a profiler per size and mode.
_KINETO_STATUS = ("USDT:", "STAGE:")


@contextlib.contextmanager
def kineto_status_lines_dropped() -> Iterator[None]:
    """Run the body with fd 2 sent to a temporary file, then write back every line of it
    but kineto's status lines: nothing else printed there (a C++ warning) is lost."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().decode(errors="replace").splitlines(True)
                    if not line.startswith(_KINETO_STATUS)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
