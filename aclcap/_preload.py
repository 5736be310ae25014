"""What aclcap's fork server (_forkserver.py) imports before it forks a child, imported there
by name and nowhere else: torch, Dynamo and the checks, with Python's cyclic garbage
collector off while they load, then every object they made frozen (`gc.freeze`), as a
pre-fork server should. Those imports stand before a cold check-meta's first op: with the
collector on they took 2.4 to 2.8 s on the 2-core CI machine, with it off 1.8 to 2.0 s (it
walked torch's ever larger heap some hundred times, to free nothing). Frozen, the objects
are never walked again in a child: a check-meta worker's own collections took 0.07 s of the
test library's checks instead of 0.22 s, and they leave the pages the children share with
the server unwritten."""

from __future__ import annotations

import gc
import importlib

MODULES = ("torch", "torch._dynamo", "torch._functorch.aot_autograd", "aclcap.meta.checks",
           "aclcap.meta.worker")


def _load() -> None:
    gc.disable()
    try:
        for name in MODULES:
            try:
                importlib.import_module(name)
            except ImportError:  # as multiprocessing's own preload: the child imports it
                pass
    finally:
        gc.enable()
    gc.freeze()


_load()
