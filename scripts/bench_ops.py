#!/usr/bin/env python
"""Benchmark the bundled CPU kernels against their eager references and the memory floor.

    .venv/bin/python scripts/bench_ops.py [--rounds N] [--json PATH]

Prints one table per size and dtype; see aclcap_ops/opbench.py for what is measured and why.
kernel/floor under 1 means the op's data stayed (partly) in the last-level cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch
from rich.console import Console

import aclcap_ops
from aclcap.report import opbench as opbench_report
from aclcap_ops import opbench

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _size(text: str) -> tuple[int, int]:
    tokens, _, hidden = text.lower().partition("x")
    return int(tokens), int(hidden)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median taken)")
    p.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    p.add_argument("--sizes", type=_size, nargs="+", default=list(opbench.DEFAULT_SIZES),
                   metavar="TOKENSxHIDDEN", help="activation sizes (default: %(default)s)")
    p.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES),
                   default=["float32", "bfloat16"])
    p.add_argument("--ops", nargs="+", choices=opbench.CASES, default=list(opbench.CASES))
    p.add_argument("--min-run-time", type=float, default=0.1,
                   help="seconds per timed measurement (default: %(default)s)")
    p.add_argument("--floors-only", action="store_true",
                   help="time each kernel against its floor only, not its eager reference "
                        "(at large sizes the references take most of the time)")
    return p.parse_args(argv)


def _load() -> str:
    """The load average: above ~0 before a run, other processes compete for the cores."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # Rich falls back to 80 columns when stdout is not a terminal: too narrow for the table.
    console = Console(width=None if sys.stdout.isatty() else 132)
    aclcap_ops.load()  # builds if stale, then registers torch.ops.aclcap

    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
                  f"cpu capability {torch.backends.cpu.get_cpu_capability()}, "
                  f"{args.rounds} rounds, {_load()}")
    dtypes = [DTYPES[d] for d in args.dtypes]
    with console.status("measuring") as status:
        rows = opbench.measure_ops(
            args.sizes, dtypes, args.rounds, args.ops, args.min_run_time,
            on_row=lambda r: status.update(f"measured {r.op} {r.dtype} {r.shape}"),
            references=not args.floors_only,
        )
    for tokens, hidden in args.sizes:
        block = [r for r in rows if r.size == (tokens, hidden)]
        if not block:
            continue
        floor = statistics.median(r.floor_gbps for r in block)
        console.print(opbench_report.render(
            block, opbench_report.OPS_WIDE, f"[{tokens} tokens, {hidden} hidden]  median floor "
            f"bandwidth {floor:.1f} GB/s (each op's own access pattern)"))
    console.print(f"done, {_load()}; speedup is a median of per-round ratios, kernel/floor "
                  "the fastest blocks' ratio")
    if args.json:
        args.json.write_text(json.dumps(opbench_report.to_dicts(rows), indent=1))
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
