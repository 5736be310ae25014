"""Confidence in bench's ratios: a bootstrap 95% interval of the median of per-round paired
ratios (criterion.rs's method), and the comparison of two such ratios that calls a change
only when its whole interval lies past the threshold. Written here: torch.utils.benchmark
gives medians and IQRs but no interval, and scipy (whose stats.bootstrap this is) is not a
dependency."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

UNSTABLE_SPREAD = 1.25  # p90 / median past which a row's rounds disagree too much to trust
# A speedup whose 95% interval is wider than this either side of it is unstable: two runs
# whose intervals are this narrow and overlap give speedups within 15% of each other.
UNSTABLE_CI = 0.07
RESAMPLES = 2000
LEVEL = 0.95


def median_p90(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return statistics.median(ordered), p90


@dataclass(frozen=True)
class Stability:
    """What one (size, mode)'s rounds say about trusting its numbers: the one rule that
    flags a row unstable, used alike to extend rounds, to flag rows and to say why."""

    spread: float  # p90 / median of its step times over rounds
    speedup: float | None = None  # median of the per-round ratios eager / this mode
    speedup_ci: tuple[float, float] | None = None  # bootstrap 95% interval of `speedup`

    @property
    def wide_spread(self) -> bool:
        return self.spread > UNSTABLE_SPREAD

    @property
    def wide_interval(self) -> bool:
        return self.speedup is not None and self.speedup_ci is not None and \
            ci_half_width(self.speedup, self.speedup_ci) > UNSTABLE_CI

    @property
    def unstable(self) -> bool:
        """The interval of the figure the row reports is too wide to trust: its speedup's,
        where it has one (eager's is [1, 1]: eager's noise widens the other modes'
        intervals instead); without eager rounds to pair with, its spread stands in. A
        wide spread alone is no flag: the median of many rounds can be steady over it."""
        if self.speedup is not None and self.speedup_ci is not None:
            return self.wide_interval
        return self.wide_spread


def stability(times: list[float], eager: list[float] | None = None) -> Stability:
    """`times` (one mode's step time per round) judged alone, and against `eager` (the
    same rounds' eager times) by the median of paired ratios: a round slowed by the
    machine as a whole slows both sides of its ratio instead of one side of a ratio of
    medians."""
    med, p90 = median_p90(times)
    if not eager:
        return Stability(p90 / med)
    ratios = [e / m for e, m in zip(eager, times, strict=False)]  # Ctrl-C: a short round drops
    return Stability(p90 / med, statistics.median(ratios), median_ci(ratios))


def median_ci(values: list[float], seed: int = 0) -> tuple[float, float]:
    """The percentile-bootstrap interval of the median of `values`; seeded, so one run's
    numbers print the same interval twice."""
    import numpy as np  # here: --baseline's comparison, read before measuring, needs none

    data = np.asarray(values, dtype=float)
    if len(data) < 2:
        return float(data[0]), float(data[0])
    picks = np.random.default_rng(seed).integers(0, len(data), (RESAMPLES, len(data)))
    medians = np.median(data[picks], axis=1)
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(medians, [tail, 100 - tail])
    return float(lo), float(hi)


def ci_half_width(point: float, ci: list[float] | tuple[float, float]) -> float:
    """Half the interval's width relative to its point: 0.05 prints as `±5%`."""
    return (ci[1] - ci[0]) / 2 / point


def ratio_interval(now: float, now_ci: tuple[float, float] | None, then: float,
                   then_ci: tuple[float, float] | None) -> tuple[float, float]:
    """The interval of now / then from each side's own interval (None: a point): two
    independent runs, so their log widths add in quadrature, each side of the interval
    from the sides of the two that move it that way."""
    now_lo, now_hi = now_ci or (now, now)
    then_lo, then_hi = then_ci or (then, then)
    down = math.hypot(math.log(now / now_lo), math.log(then_hi / then))
    up = math.hypot(math.log(now_hi / now), math.log(then / then_lo))
    return now / then * math.exp(-down), now / then * math.exp(up)
