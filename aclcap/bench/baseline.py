"""--save-baseline / --baseline: compare this run's ratios with a saved run's. Ratios
(mode/eager, kernel/reference), so the machine's speed cancels out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aclcap.bench.stats import UNSTABLE_CI, Stability, ratio_interval
from aclcap.errors import UsageError


def load_baseline(baseline_path: str) -> dict:
    """A saved `aclcap bench` document; read before measuring so a bad path fails fast."""
    try:
        baseline = json.loads(Path(baseline_path).read_text())
    except FileNotFoundError as exc:
        raise UsageError(f"--baseline {baseline_path}: file not found (write one with "
                         "--save-baseline)") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"--baseline {baseline_path}: not a JSON document ({exc})") from exc
    if baseline.get("tool") != "aclcap" or baseline.get("command") != "bench":
        raise UsageError(f"--baseline {baseline_path}: not an `aclcap bench` document")
    return baseline


def regressions(current: dict, baseline: dict, max_regression: float) -> list[str]:
    """Rows whose ratio to their reference (graph/eager, kernel/reference) grew past
    `max_regression` relative to the baseline: ratios, so the machine's speed cancels. Where
    both runs give the ratio's interval (`speedup_ci`), only a growth whose whole interval
    lies past the threshold counts, and only where neither run's interval is wider than
    bench calls stable: a noisy rerun of the same code is not a regression."""
    return [_describe(change, max_regression) for change in _changes(current, baseline)
            if change.low > 1 + max_regression and not change.wide]


def undecided(current: dict, baseline: dict, max_regression: float) -> list[str]:
    """Rows whose ratio grew past `max_regression` while its interval reaches back under
    it, or while either run's interval is wider than bench calls stable (an interval that
    wide may not repeat: a neighbour's load swung tiny_llama's graph/eager 2.3x between two
    runs of the same code, one run's interval wide): too noisy to call either way
    (criterion.rs's "change within noise"), said so rather than passed in silence."""
    lines = []
    for change in _changes(current, baseline):
        past = change.low > 1 + max_regression
        if change.now / change.then > 1 + max_regression and (change.wide or not past):
            why = f"; a run's interval is wider than ±{UNSTABLE_CI:.0%}" if past else ""
            lines.append(f"{_describe(change, max_regression)}: not called a regression{why}; "
                         "rerun with more --rounds or on a quieter machine to tell")
    return lines


# the point, its interval if known, and whether that interval is wider than bench's limit
Ratio = tuple[float, tuple[float, float] | None, bool]


@dataclass
class _Change:
    label: str
    now: float
    then: float
    low: float  # the interval of now / then
    high: float
    has_interval: bool  # either run gave one
    wide: bool  # either run's interval is wider than UNSTABLE_CI either side


def _describe(c: _Change, max_regression: float) -> str:
    interval = f", 95% interval {(c.low - 1) * 100:+.0f}% to {(c.high - 1) * 100:+.0f}%" \
        if c.has_interval else ""
    return f"{c.label}: {c.now:.3f} vs baseline {c.then:.3f} " \
           f"(+{(c.now / c.then - 1) * 100:.0f}% > {max_regression * 100:.0f}%{interval})"


def _changes(current: dict, baseline: dict) -> list[_Change]:
    """Each ratio both runs have, with the interval of now / then."""
    return [_Change(label, now, then, *ratio_interval(now, now_ci, then, then_ci),
                    has_interval=bool(now_ci or then_ci), wide=now_wide or then_wide)
            for label, (now, now_ci, now_wide), (then, then_ci, then_wide)
            in _ratio_pairs(current, baseline)]


def _ratios(doc: dict) -> dict[str, Ratio]:
    ratios: dict[str, Ratio] = {}
    eager = {r["size"]: r["step_median_us"] for r in doc.get("results", [])
             if r["mode"] == "eager"}
    for r in doc.get("results", []):
        if r["mode"] != "eager" and r["size"] in eager and r["step_median_us"] is not None:
            point = r["step_median_us"] / eager[r["size"]]
            ratios[f"size {r['size']} {r['mode']}/eager"] = \
                (point, _interval(point, r), _wide(r))
    for r in doc.get("ops", []):
        ratios[f"op {r['op']} {r['dtype']} {r['shape']} kernel/reference"] = \
            (r["kernel_us"] / r["reference_us"], None, False)
    return ratios


def _interval(point: float, row: dict) -> tuple[float, float] | None:
    """The mode/eager ratio's interval: the speedup's (its inverse) as a relative width
    around the point (None for a document from before intervals)."""
    speedup, ci = row.get("speedup_vs_eager"), row.get("speedup_ci")
    if not speedup or not ci:
        return None
    return point * speedup / ci[1], point * speedup / ci[0]


def _wide(row: dict) -> bool:
    """The row's speedup interval is wider than bench calls stable (Stability.wide_interval)."""
    ci = row.get("speedup_ci")
    return Stability(0.0, row.get("speedup_vs_eager"), tuple(ci) if ci else None).wide_interval


def _ratio_pairs(current: dict, baseline: dict) -> list[tuple[str, Ratio, Ratio]]:
    now, then = _ratios(current), _ratios(baseline)
    return [(label, now[label], then[label]) for label in now if label in then]
