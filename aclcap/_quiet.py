"""torch's log noise off: torch.compile logs every graph break as a warning and torch.export
dumps the graph on failure, while the reports list each once. Rank processes inherit the
choice through ACLCAP_QUIET."""

from __future__ import annotations

import logging
import os
import warnings

QUIET_ENV = "ACLCAP_QUIET"


def silence_torch() -> None:
    import torch

    os.environ[QUIET_ENV] = "1"
    torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR,
                            export=logging.CRITICAL)
    warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")


def silence_if_asked() -> None:
    """In a rank process: silence torch as its parent did."""
    if os.environ.get(QUIET_ENV) == "1":
        silence_torch()
