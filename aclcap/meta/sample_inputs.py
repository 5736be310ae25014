"""Sample inputs that op libraries declare, so check-meta can run the real kernel against
the meta impl (the README's "Op libraries and sample inputs" contract)."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

SampleFn = Callable[[Any, Any], Iterable["SampleInput"]]

_REGISTRY: dict[str, SampleFn] = {}
SEED = 0


def seed_all() -> None:
    """Every generator a sample maker may draw from, set to SEED: torch's, and Python's
    `random` and numpy's, which libraries' own test helpers use for host lengths. Unseeded,
    a worker's draws depend on the ops it drew for before: synthesis wrote another fake run
    to run, and its verifying worker could not make the held-out calls again (issue 49)."""
    import torch

    torch.manual_seed(SEED)
    random.seed(SEED)
    if (numpy := sys.modules.get("numpy")) is not None:
        numpy.random.seed(SEED)


@dataclass
class SampleInput:
    """One call of an op: positional and keyword arguments, real tensors. `setup`, where
    set, puts back state the call read outside its arguments (vLLM's forward context, as the
    model step's draw set it): called before every run of the kernel on this sample."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    setup: Callable[[], None] | None = field(default=None, compare=False)

    def enter(self) -> None:
        """Put back the state this call was recorded in, if it read any."""
        if self.setup is not None:
            self.setup()


def normalize_qualname(qualname: str) -> str:
    """`ns::name` and `ns::name.default` name the same overload; keep the explicit form."""
    if "::" not in qualname:
        raise ValueError(f"op name {qualname!r} must look like 'namespace::name'")
    return qualname if "." in qualname.split("::", 1)[1] else qualname + ".default"


def samples(qualname: str) -> Callable[[SampleFn], SampleFn]:
    """Register `fn(device, dtype) -> iterable of SampleInput` for an op overload."""
    key = normalize_qualname(qualname)

    def register(fn: SampleFn) -> SampleFn:
        _REGISTRY[key] = fn
        return fn

    return register


def declared_words(count: int, dtypes: int) -> str:
    """`2 declared x 2 dtypes`: declared samples run once per dtype, which a bare count of
    4 would hide."""
    if dtypes > 1 and count and count % dtypes == 0:
        return f"{count // dtypes} declared x {dtypes} dtypes"
    return f"{count} declared"


def samples_for(qualname: str) -> SampleFn | None:
    """The sample generator registered for an overload, if any."""
    return _REGISTRY.get(normalize_qualname(qualname))
