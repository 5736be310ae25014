#!/usr/bin/env python
"""Benchmark the bundled CPU kernels against their eager references and the memory floor.

    .venv/bin/python scripts/bench_ops.py [--rounds N] [--json PATH]

Prints one table per size and dtype; see aclcap/opbench.py for what is measured and why.
kernel/floor under 1 means the op's data stayed (partly) in the last-level cache.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aclcap import opbench

DEFAULT_SIZES = ((32, 4096), (512, 4096), (4096, 4096))
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _size(text: str) -> tuple[int, int]:
    tokens, _, hidden = text.lower().partition("x")
    return int(tokens), int(hidden)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median taken)")
    p.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    p.add_argument("--sizes", type=_size, nargs="+", default=list(DEFAULT_SIZES),
                   metavar="TOKENSxHIDDEN", help="activation sizes (default: %(default)s)")
    p.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES),
                   default=["float32", "bfloat16"])
    p.add_argument("--ops", nargs="+", choices=opbench.OPS, default=list(opbench.OPS))
    p.add_argument("--min-run-time", type=float, default=0.1,
                   help="seconds per timed measurement (default: %(default)s)")
    return p.parse_args(argv)


def _table(title: str, rows: list[opbench.OpBenchRow]) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("op", "dtype", "shape", "kernel us", "ref us", "speedup", "F.rms_norm us",
                 "GB/s", "floor us", "kernel/floor"):
        table.add_column(name, justify="left" if name in ("op", "dtype", "shape") else "right")
    for r in rows:
        ratio = f"{r.kernel_over_floor:.2f}x"
        table.add_row(
            r.op, r.dtype, "x".join(map(str, r.shape)), f"{r.kernel_us:,.1f}",
            f"{r.reference_us:,.1f}", f"{r.speedup:.2f}x",
            "" if r.f_rms_norm_us is None else f"{r.f_rms_norm_us:,.1f}",
            f"{r.achieved_gbps:.1f}", f"{r.floor_us:,.1f}", ratio,
        )
    return table


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # Rich falls back to 80 columns when stdout is not a terminal: too narrow for the table.
    console = Console(width=None if sys.stdout.isatty() else 132)
    import aclcap_ops  # noqa: F401  (builds if stale, then registers torch.ops.aclcap)

    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
                  f"cpu capability {torch.backends.cpu.get_cpu_capability()}, "
                  f"{args.rounds} rounds")
    dtypes = [DTYPES[d] for d in args.dtypes]
    with console.status("measuring") as status:
        rows = opbench.measure_ops(
            args.sizes, dtypes, args.rounds, args.ops, args.min_run_time,
            on_row=lambda r: status.update(f"measured {r.op} {r.dtype} {r.shape}"),
        )
    for tokens, hidden in args.sizes:
        block = [r for r in rows if r.size == (tokens, hidden)]
        copy = sorted(r.copy_gbps for r in block)[len(block) // 2] if block else 0.0
        console.print(_table(f"[{tokens} tokens, {hidden} hidden]  clone copy bandwidth "
                             f"{copy:.1f} GB/s (median over rows)", block))
    if args.json:
        args.json.write_text(json.dumps(opbench.rows_as_dicts(rows), indent=1))
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
