"""`aclcap bench`: one row per size and mode, then what graph replay removed, the floors,
and `--profile`'s tables."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from aclcap.bench.caches import MEMORY
from aclcap.bench.stats import UNSTABLE_CI, UNSTABLE_SPREAD, ci_half_width
from aclcap.report import profile
from aclcap.report.layout import WIDE, Col, document, line, num, plain, short, table, times

if TYPE_CHECKING:
    from aclcap.bench.opfloor import BoundedOpRow
    from aclcap.bench.run import BenchReport, BenchRow

_BENCH = (Col("size", "size"), Col("mode", "mode", True), Col("mechanism", None, True),
          Col("step median\n(µs)", "med µs"), Col("step p90\n(µs)", "p90 µs"),
          Col("host\n(µs)", "host µs"), Col("device\n(µs)", "dev µs"),
          Col("launches/step", "launch"), Col("speedup vs\neager", "vs eager"))


def render(result: BenchReport, width: int) -> list[RenderableType]:
    """Everything `aclcap bench` prints about its steps, in order, one renderable a print
    (`--ops` has its own module: it times the bundled ops, not the model)."""
    return [bench_table(result, width),
            *(line(text) for text in [*bench_lines(result), *floor_lines(result),
                                      *host_update_lines(result)]),
            *profile.render(result, width)]


def host_update_lines(result: BenchReport) -> list[str]:
    """The step's host values copied into persistent tensors before each replay, beside the
    replay: what keeping them out of the graph costs per step."""
    rows = [r for r in result.rows if r.mode == "graph" and r.host_update_us is not None]
    if not rows:
        return []
    parts = [f"size {r.size}: {r.host_update_us:.1f} µs beside a "
             f"{r.step_median_us:.1f} µs replay ({r.host_update_us / r.step_median_us:.2f}x)"
             for r in rows]
    return ["host values updated before each replay (copied into persistent tensors, as "
            "vLLM keeps attention metadata; an Ascend task update costs more): "
            + "; ".join(parts)]


def to_document(result: BenchReport, ops: list[dict]) -> dict:
    """`ops`: the `--ops` rows (empty without it)."""
    rows = [{k: v for k, v in r.to_dict().items() if k != "per_rank" or v is not None}
            for r in result.rows]
    return document("bench", result.device, rows, model=result.model, dtype=result.dtype,
                    mechanism=result.mechanism, rounds=result.rounds,
                    interrupted=result.interrupted, unstable=result.unstable, ops=ops,
                    read_gbps={str(k): v for k, v in result.read_gbps.items()},
                    floor_passes={str(k): v for k, v in result.floor_passes.items()},
                    floor_levels={str(k): v for k, v in result.floor_levels.items()},
                    max_autotune=result.max_autotune,
                    step_bytes={str(k): asdict(v) for k, v in result.step_bytes.items()},
                    profile=profile.to_dicts(result))


def bench_table(result: BenchReport, width: int) -> Table:
    """Below WIDE the title names the graph mechanism instead of a column: the mode implies
    each row's."""
    ranks = f", {result.ranks} ranks, each round the slowest rank's" if result.ranks else ""
    timed = f"median of {result.rounds} interleaved rounds{ranks}" if result.rounds else \
        "nothing timed"
    title = f"aclcap bench {result.model}: {result.device}, {result.dtype}, {timed}"
    tuned = ", tuned by --max-autotune" if result.max_autotune else ""
    title += f"\n({graph_mechanisms(result)}{tuned})" if width < WIDE or tuned else ""
    rows = ([str(r.size), r.mode, r.mechanism, short(r.step_median_us, 1, 1000),
             short(r.step_p90_us, 1, 1000), short(r.host_us, 1, 1000),
             short(r.device_us, 1, 1000), num(r.launches, "d"), _speedup(r)]
            for r in result.rows)
    return table(title, _BENCH, rows, width >= WIDE)


def graph_mechanisms(result: BenchReport) -> str:
    """`graph mode: aoti; piecewise: aoti-piecewise`: each replaying mode's mechanism, from
    its rows (--graph-mode full,piecewise replays two); the report's own without rows."""
    named = {r.mode: r.mechanism for r in result.rows if r.mode in ("graph", "piecewise")}
    label = {"graph": "graph mode", "piecewise": "piecewise"}
    return "; ".join(f"{label[mode]}: {mechanism}" for mode, mechanism in named.items()) or \
        f"graph mode: {result.mechanism}"


def _paired(row: BenchRow) -> bool:
    """The row has a speedup over eager with its interval (eager's own is 1 by definition)."""
    judged = row.stability
    return judged.speedup is not None and judged.speedup_ci is not None and row.mode != "eager"


def _speedup(row: BenchRow) -> str:
    """`1.80x ±0.06`: the speedup and the half width of its 95% interval; a row flagged
    unstable says how wide relatively, starred (`1.80x ±12%*`): one short cell, the
    footnote under the table (unstable_line)."""
    judged = row.stability
    if row.stale:
        return "not valid"
    if not _paired(row):  # without eager to pair with, its spread stands in
        return f"spread {row.spread:.2f}*" if row.unstable else times(row.speedup_vs_eager)
    lo, hi = judged.speedup_ci or (0.0, 0.0)
    if row.unstable:
        return f"{times(judged.speedup)} ±{ci_half_width(judged.speedup or 1.0, (lo, hi)):.0%}*"
    return f"{times(judged.speedup)} ±{(hi - lo) / 2:.2f}"


def unstable_line(result: BenchReport) -> str | None:
    """The footnote of the starred cells, once under the table: what the star means and
    how to get a steadier run."""
    flagged = [r for r in result.rows if r.unstable]
    if not flagged:
        return None
    limits = [f"a 95% interval past ±{UNSTABLE_CI:.0%}"] if any(map(_paired, flagged)) else []
    if not all(map(_paired, flagged)):
        limits.append(f"a spread (p90 / median) past {UNSTABLE_SPREAD}")
    return (f"* {' or '.join(limits)} over {result.rounds} rounds: too wide to trust; for a "
            "steadier run, stop other work on the machine or raise --max-time")


def bench_lines(result: BenchReport) -> list[str]:
    lines = [line] if (line := unstable_line(result)) else []
    what = "step time" if result.device == "cpu" else "host time per step"
    for r in result.stale:
        lines.append(f"size {r.size}: {r.mode} replay is NOT VALID, not timed: {r.stale}")
    for size, share in result.host_overhead_removed().items():
        did = f"removed {share:.0%} of" if share >= 0 else f"added {-share:.0%} to"
        lines.append(f"size {size}: graph replay ({result.mechanism}) {did} eager's {what}")
    for size, ratio in result.padding_cost().items():
        lines.append(f"size {size}: padded replay takes {ratio:.2f}x the exact-size graph's step "
                     "time")
    if result.device == "cpu":
        lines.append("on cpu all time is host time: no device time (—), and host time = step time")
    for r in result.rows:
        if r.per_rank:
            each = ", ".join(f"rank {p['rank']} {p['step_median_us']:.1f}" for p in r.per_rank)
            lines.append(f"size {r.size} {r.mode}: per-rank median step (µs): {each}")
    if result.interrupted:
        lines.append("interrupted: the table holds the rounds finished before Ctrl-C")
    return lines


def floor_lines(result: BenchReport) -> list[str]:
    """Per size, the bytes a step must move, where its floor was read from, and each mode's
    time over that floor."""
    lines = []
    for size, b in result.step_bytes.items():
        if size not in result.read_gbps:
            continue
        over = ", ".join(f"{r.mode} {r.over_floor:.1f}x" for r in result.rows
                         if r.size == size and r.over_floor is not None)
        gbps = result.read_gbps[size]
        lines.append(f"size {size}: a step moves {b.total / 2**20:.1f} MiB (weights "
                     f"{b.params_bytes / 2**20:.1f}, inputs {b.inputs_bytes / 2**20:.1f}, "
                     f"written {b.written_bytes / 2**20:.2f}): floor {b.total / gbps / 1e3:.0f} "
                     f"µs at {gbps:.1f} GB/s {_read_from(result.floor_levels[size])} (the "
                     f"fastest of {result.floor_passes[size]} read passes over as many bytes, "
                     f"between the modes' rounds); {over}")
    return lines


def op_floor_line(rows: list[BoundedOpRow]) -> Text:
    """Under the --ops table: which floor its kernel/floor column divides by, per level
    (each JSON row names its own: `floor_level`)."""
    counts = Counter(r.floor_level for r in rows)
    cached = {level: n for level, n in sorted(counts.items()) if level != MEMORY}
    parts = []
    if cached:
        each = ", ".join(f"{level} {n}" for level, n in cached.items())
        parts.append(f"{sum(cached.values())} rows' bytes fit in a cache ({each}): their floor "
                     "is the faster of the op's own pass and one call moving as many bytes "
                     "kept in that cache")
    if counts[MEMORY]:
        parts.append(f"{counts[MEMORY]} rows' floor is the op's own pass, from memory")
    return plain(f"floors: {'; '.join(parts)} (JSON floor_level, per row)")


def _read_from(level: str) -> str:
    """`from the L3 cache`, `from memory`, or on a device `on cuda`: which floor it is."""
    if level == MEMORY:
        return "from memory"
    return f"from the {level} cache" if level.startswith("L") else f"on {level}"
