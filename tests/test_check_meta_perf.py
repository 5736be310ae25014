"""Timing relations of whole check-meta runs, as a user starts them: a benchmark's verdict
on a quiet machine (marker perf, `make bench`), never the suite's."""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BADOPS, ROOT
from tests.perf import assert_median_holds


def _seconds(args: list[str], cache: Path) -> float:
    """One whole process's wall time, with a cache folder of its own."""
    cache.mkdir()
    start = time.perf_counter()
    subprocess.run(args, cwd=ROOT, capture_output=True, timeout=600,
                   env={**os.environ, "ACLCAP_CACHE_DIR": str(cache)})
    return time.perf_counter() - start


@pytest.mark.perf
def test_a_cold_run_costs_a_few_imports_of_torch(tmp_path):
    """A cold `check-meta --no-cache` (an empty cache folder) against `python -c "import
    torch"` in turns, the median of three pairs per try. The test library read 3.9x before
    the work of issue 58 and 2.35x after it, the bundled library 5.9x and 3.6x (the quiet
    2-core machine, docs/measurements.md): the test library is held to the issue's goal of
    3x, the bundled one to 4x, since the fork server's imports (torch, then Dynamo) and
    its nine ops' 26 compiles alone come to about 3x. Each value is the margin to its
    bound: negative is a miss."""
    exe = str(Path(sys.executable).with_name("aclcap"))
    runs = {"test library": [exe, "check-meta", "--lib", str(BADOPS), "--namespace",
                             "aclcap_test", "--no-cache"],
            "bundled library": [exe, "check-meta", "--lib", "aclcap_ops", "--no-cache"]}
    bounds = {"test library": 3.0, "bundled library": 4.0}
    folders = itertools.count()

    def measure() -> dict:
        ratios: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(3):
            for name, args in runs.items():
                torch_s = _seconds([sys.executable, "-c", "import torch"],
                                   tmp_path / str(next(folders)))
                ratios[name].append(_seconds(args, tmp_path / str(next(folders))) / torch_s)
        return {name: bounds[name] - statistics.median(r) for name, r in ratios.items()}

    assert_median_holds(measure, lambda margin: margin >= 0,
                        "a cold check-meta over its bound in imports of torch")
