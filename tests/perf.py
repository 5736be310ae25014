"""Timing relations on a shared, noisy machine: measure up to three times and judge the
median, so one slow moment of the machine neither fails a test nor hides a real defect
(a relation a defect breaks fails the median of three as well). Tests that use this are
marked `perf`; `make test` runs them with the rest."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable

TRIES = 3


def assert_median_holds(measure: Callable[[], dict[Hashable, float]],
                        holds: Callable[[float], bool], what: str) -> dict[Hashable, float]:
    """`measure()` gives a value per key (an op, a size); every key's median over the tries
    so far must satisfy `holds`. Measures again, up to TRIES times, while one does not;
    returns the medians."""
    tries: list[dict[Hashable, float]] = []
    medians: dict[Hashable, float] = {}
    for _ in range(TRIES):
        tries.append(measure())
        medians = {key: statistics.median(t[key] for t in tries) for key in tries[0]}
        if all(holds(value) for value in medians.values()):
            return medians
    failing = {key: round(value, 3) for key, value in medians.items() if not holds(value)}
    raise AssertionError(f"{what}, median of {TRIES} tries: {failing} (every try: {tries})")
