"""aclcap bench --nproc N: the same interleaved rounds on every rank in lockstep. A TP
step ends when its slowest rank ends, so each round's time is the max over ranks; the
medians are taken over those maxima, and each rank's own host and device time is kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from aclcap.bench.options import BenchOptions
from aclcap.bench.run import BenchReport, judge_rows, run_bench, with_model
from aclcap.bench.stats import median_p90
from aclcap.errors import UsageError
from aclcap.graph.distributed import RankInfo, launch


def bench_rank(info: RankInfo, options: BenchOptions) -> BenchReport:
    """One rank's bench (run by the launcher after the process group is up)."""
    return run_bench(options, lambda msg, done, total: info.phase(msg), rank=info)


def merge_ranks(reports: list[BenchReport]) -> BenchReport:
    rows, series = [], {}
    for row in reports[0].rows:
        key = (row.size, row.mode)
        rounds = min(len(r.raw[key]) for r in reports)
        slowest = [max(r.raw[key][i].step_us for r in reports) for i in range(rounds)]
        series[key] = slowest
        med, p90 = median_p90(slowest)
        per_rank = []
        for rank, report in enumerate(reports):
            mine = next(x for x in report.rows if (x.size, x.mode) == key)
            per_rank.append({"rank": rank, "step_median_us": mine.step_median_us,
                             "host_us": mine.host_us, "device_us": mine.device_us})
        rows.append(replace(row, step_median_us=med, step_p90_us=p90,
                            host_us=max(p["host_us"] for p in per_rank), per_rank=per_rank,
                            over_floor=med / row.floor_us if row.floor_us else None))
    judge_rows(rows, series)
    return replace(reports[0], rows=rows, raw={}, ranks=len(reports),
                   interrupted=any(r.interrupted for r in reports))


def run_bench_ranks(options: BenchOptions, on_phase: Callable[[str], None] | None = None
                    ) -> BenchReport:
    """Bench on `options.nproc` ranks; bad input, a rank's error or a deadlock raise."""
    from aclcap.devices import resolve_device

    if options.nproc is None:
        raise ValueError("run_bench_ranks needs options.nproc")
    if options.profile:
        raise UsageError("--profile profiles one process: leave out --nproc")
    resolved = resolve_device(options.device)
    options = replace(with_model(options), device=resolved)
    reports = launch(bench_rank, {"options": options}, options.nproc, resolved,
                     options.timeout, options.port, Path(str(options.model)), on_phase)
    return merge_ranks(reports)
