"""`aclcap bench`: parse, time, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from aclcap.bench.options import BenchOptions
from aclcap.cli._errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, handle_errors
from aclcap.cli._options import (
    DeviceOpt,
    DtypeOpt,
    JsonOpt,
    MaxAutotuneOpt,
    NprocOpt,
    OversubscribeOpt,
    PortOpt,
    ShapesOpt,
    TimeoutOpt,
    check_dtype_name,
    check_model_path,
    check_output_path,
    progress_bar,
    quiet_torch,
    stepper,
)


@handle_errors
def bench(
    model: Annotated[Path | None, typer.Argument(metavar="[MODEL.py]", help="A model file; "
                     "default: examples/tiny_llama.py of a source checkout.")] = None,
    shapes: ShapesOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    modes: Annotated[str, typer.Option(help="Comma-separated: eager (plain module), compiled "
                     "(torch.compile, inductor), graph (aclgraph / cudagraph / aoti replay).")
                     ] = "eager,compiled,graph",
    rounds: Annotated[int, typer.Option(min=5, help="Interleaved rounds (at least 5); medians and "
                      "p90 are over rounds.")] = 7,
    min_time: Annotated[float, typer.Option("--min-time", min=0, help="Seconds the timing "
                        "runs at least: past --rounds, rounds continue so a run samples a "
                        "shared machine over seconds, not one moment of it (at most 60 "
                        "rounds).")] = 3.0,
    max_time: Annotated[float, typer.Option("--max-time", min=0, help="Seconds the timing may "
                        "run: past --rounds, rounds extend while a row's spread (p90/median) "
                        "is past 1.25 or its speedup's 95% interval is wider than ±7%; a row "
                        "still past either is flagged unstable.")] = 20.0,
    plot: Annotated[Path | None, typer.Option("--plot", metavar="FILE.png", help="Also plot "
                    "step time against size, one line per mode (needs the plot extra).")
                    ] = None,
    save_baseline: Annotated[Path | None, typer.Option("--save-baseline", metavar="FILE",
                             help="Write this run's JSON document to FILE.")] = None,
    baseline: Annotated[Path | None, typer.Option("--baseline", metavar="FILE", help="Compare "
                        "ratios (mode/eager, kernel/reference) with FILE; exit 1 on a "
                        "regression.")] = None,
    max_regression: Annotated[float, typer.Option(min=0.0, help="Allowed growth of a ratio "
                              "over the baseline (0.10 = 10%).")] = 0.10,
    ops: Annotated[bool, typer.Option("--ops", help="Also time every bundled op against its "
                   "eager reference and the memory-traffic floor.")] = False,
    pad: Annotated[bool, typer.Option("--pad", help="Also time each size between capture "
                   "sizes on its own graph and padded onto the next one.")] = False,
    profile: Annotated[bool, typer.Option("--profile", help="Also profile a few steps of "
                       "each size and mode (torch.profiler): top ops by self time as a "
                       "share of the step, side by side per mode.")] = False,
    max_autotune: MaxAutotuneOpt = False,
    graph_mode: Annotated[str, typer.Option(
        "--graph-mode", metavar="full,piecewise", help="What graph mode replays: full (one "
        "graph per size), piecewise (split at the splitting ops; cpu only so far), or both "
        "comma-separated (piecewise then gets rows of its own).")] = "full",
    split_ops: Annotated[str | None, typer.Option(
        "--split-ops", metavar="NS::OP,...", help="With piecewise: the ops to split at, "
        "instead of the model file's SPLITTING_OPS.")] = None,
    nproc: NprocOpt = None,
    oversubscribe: OversubscribeOpt = False,
    timeout: TimeoutOpt = 120.0,
    port: PortOpt = 0,
    json_path: JsonOpt = None,
) -> None:
    """Time eager vs compiled vs graph replay per size, interleaved in rounds in one process:
    step median and p90, host and device time, launches per step, speedup vs eager. Exit 1
    when --baseline finds a regression. With --nproc each round is the slowest rank's."""
    from aclcap.bench.baseline import load_baseline, regressions, undecided
    from aclcap.bench.modes import parse_modes
    from aclcap.devices import check_nproc, resolve_device
    from aclcap.loading.model_file import parse_shapes
    from aclcap.report import bench as bench_report
    from aclcap.report import opbench as opbench_report
    from aclcap.report.layout import console_for, write_json

    for option, path in (("--json", json_path), ("--plot", plot),
                         ("--save-baseline", save_baseline)):
        check_output_path(option, path)
    if plot is not None:
        from aclcap.bench.plot import require_matplotlib

        require_matplotlib()
    # Every check on the arguments alone comes before torch and the model are imported.
    if model is not None:
        check_model_path(model)
    sizes = parse_shapes(shapes) if shapes is not None else None
    baseline_doc = load_baseline(str(baseline)) if baseline is not None else None
    check_dtype_name(dtype)
    chosen = parse_modes(modes)
    from aclcap.errors import UsageError
    from aclcap.graph.options import parse_graph_mode

    graph_modes, splits = parse_graph_mode(graph_mode, split_ops, several=True)
    if "piecewise" in graph_modes and nproc is not None:
        raise UsageError("--graph-mode piecewise runs one process: leave out --nproc")
    if "piecewise" in graph_modes and "graph" not in chosen:
        raise UsageError("--graph-mode piecewise times graph replay: keep graph in --modes")
    resolved = resolve_device(device)  # auto asks torch whether cuda is there: last
    if nproc is not None:
        check_nproc(nproc, resolved, oversubscribe)
        from aclcap import _forkserver

        _forkserver.start()  # the ranks' server imports torch while this process does
    options = BenchOptions(
        model=str(model) if model else None, shapes=tuple(sizes) if sizes is not None else None,
        device=device, dtype=dtype, max_autotune=max_autotune, nproc=nproc, timeout=timeout,
        port=port, modes=chosen, rounds=rounds, pad=pad, profile=profile,
        min_time_s=min_time, max_time_s=max_time, graph_mode=graph_modes, split_ops=splits)
    from aclcap.bench.run import run_bench

    quiet_torch()
    with progress_bar() as progress:
        advance = stepper(progress)
        if nproc is None:
            result = run_bench(options, advance)
        else:
            from aclcap.bench.ranks import run_bench_ranks

            result = run_bench_ranks(options, lambda phase: advance(f"rank 0: {phase}", 0, 0))
        op_rows = []
        if ops and not result.interrupted:
            from aclcap_ops import load, opbench

            load()
            advance("timing the bundled ops", 0, 0)
            op_rows = opbench.measure_ops(opbench.DEFAULT_SIZES)
    doc = bench_report.to_document(result, opbench_report.to_dicts(op_rows))
    for path in (json_path, save_baseline):
        if path:
            write_json(str(path), doc)
    console = console_for(json_path)
    for part in bench_report.render(result, console.width):
        console.print(part)
    if op_rows:
        console.print(opbench_report.render(op_rows, console.width))
    if plot is not None:
        from aclcap.bench.plot import plot_bench

        plot_bench(result, str(plot))
        console.print(f"plot written to {plot}")
    if baseline_doc is not None:
        found = regressions(doc, baseline_doc, max_regression)
        for line in found:
            console.print(f"[red]regression:[/] {escape(line)}", highlight=False)
        for line in undecided(doc, baseline_doc, max_regression):
            console.print(f"[yellow]undecided:[/] {escape(line)}", highlight=False)
        if found:
            raise typer.Exit(EXIT_FAILED)
        console.print(f"no regression against {baseline} (max {max_regression:.0%})")
    raise typer.Exit(EXIT_INTERRUPTED if result.interrupted else EXIT_OK)
