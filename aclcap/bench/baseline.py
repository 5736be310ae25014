"""--save-baseline / --baseline: compare this run's ratios with a saved run's. Ratios
(mode/eager, kernel/reference), so the machine's speed cancels out."""

from __future__ import annotations

import json
from pathlib import Path

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
    `max_regression` relative to the baseline: ratios, so the machine's speed cancels."""
    found = []
    for label, now, then in _ratio_pairs(current, baseline):
        if now > then * (1 + max_regression):
            found.append(f"{label}: {now:.3f} vs baseline {then:.3f} "
                         f"(+{(now / then - 1) * 100:.0f}% > {max_regression * 100:.0f}%)")
    return found


def _ratios(doc: dict) -> dict[str, float]:
    ratios = {}
    eager = {r["size"]: r["step_median_us"] for r in doc.get("results", [])
             if r["mode"] == "eager"}
    for r in doc.get("results", []):
        if r["mode"] != "eager" and r["size"] in eager:
            ratios[f"size {r['size']} {r['mode']}/eager"] = r["step_median_us"] / eager[r["size"]]
    for r in doc.get("ops", []):
        ratios[f"op {r['op']} {r['dtype']} {r['shape']} kernel/reference"] = \
            r["kernel_us"] / r["reference_us"]
    return ratios


def _ratio_pairs(current: dict, baseline: dict) -> list[tuple[str, float, float]]:
    now, then = _ratios(current), _ratios(baseline)
    return [(label, now[label], then[label]) for label in now if label in then]
