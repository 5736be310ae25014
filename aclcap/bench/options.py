"""`aclcap bench`'s options: the shared step options and what only bench does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from aclcap.graph.options import StepOptions


@dataclass(frozen=True)
class BenchOptions(StepOptions):
    modes: tuple[str, ...] = ("eager", "compiled", "graph")
    rounds: int = 7  # interleaved rounds; medians and p90 are over them
    # Rounds continue until the timing has run this long: a shared machine's memory slows
    # for seconds at a time (a neighbour's cache traffic), so a run a fraction of a second
    # long times one such phase, and its numbers repeat in no run that times another.
    min_time_s: float = 3.0
    max_time_s: float = 20.0  # timing budget: rounds extend within it while a spread is wide
    pad: bool = False  # also time the sizes between capture sizes, padded
    profile: bool = False  # also profile a few steps of each size and mode

    CACHE_IGNORED: ClassVar[dict[str, str]] = {
        **StepOptions.CACHE_IGNORED,
        "modes": "which timings run, not what graph mode replays",
        "rounds": "how long the timing runs",
        "min_time_s": "how long the timing runs",
        "max_time_s": "how long the timing may extend",
        "pad": "pads inputs to a captured size: the artifact is the same",
        "profile": "observes the steps after timing",
    }
