"""`aclcap bench`: parse, time, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from aclcap.bench.options import BenchOptions
from aclcap.cli._errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, handle_crashes
from aclcap.cli._options import (
    GRAPH,
    OUTPUT,
    CpuMechanismOpt,
    DeviceOpt,
    DtypeOpt,
    FakesOpt,
    JsonOpt,
    MaxAutotuneOpt,
    NprocOpt,
    OversubscribeOpt,
    PortOpt,
    ShapesOpt,
    SplitOpsOpt,
    TimeoutOpt,
    check_dtype_name,
    check_fakes,
    check_graph_mode,
    check_model_path,
    check_output_path,
    check_split_ops,
    progress_bar,
    quiet_torch,
    stepper,
)

TIMING = "Timing"


@handle_crashes
def bench(
    model: Annotated[Path | None, typer.Argument(
        metavar="[MODEL.py]", help="A model file (default: examples/tiny_llama.py).")] = None,
    shapes: ShapesOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    modes: Annotated[str, typer.Option(
        metavar="MODES", rich_help_panel=TIMING,
        help="Comma-separated: eager, compiled, graph.")] = "eager,compiled,graph",
    rounds: Annotated[int, typer.Option(
        metavar="N", min=5, rich_help_panel=TIMING,
        help="Interleaved rounds, at least 5.")] = 7,
    min_time: Annotated[float, typer.Option(
        "--min-time", metavar="SECONDS", min=0, rich_help_panel=TIMING,
        help="Seconds the rounds run at least.")] = 3.0,
    max_time: Annotated[float, typer.Option(
        "--max-time", metavar="SECONDS", min=0, rich_help_panel=TIMING,
        help="Seconds they may run on while a row is unsteady.")] = 20.0,
    ops: Annotated[bool, typer.Option(
        "--ops", rich_help_panel=TIMING,
        help="Also time each bundled op against its reference.")] = False,
    pad: Annotated[bool, typer.Option(
        "--pad", rich_help_panel=TIMING,
        help="Also time the sizes between, padded up.")] = False,
    profile: Annotated[bool, typer.Option(
        "--profile", rich_help_panel=TIMING,
        help="Also profile: top ops per size and mode.")] = False,
    graph_mode: Annotated[str, typer.Option(
        "--graph-mode", metavar="MODES", rich_help_panel=GRAPH,
        help="full, piecewise, or both (full,piecewise).")] = "full",
    split_ops: SplitOpsOpt = None,
    fakes: FakesOpt = None,
    max_autotune: MaxAutotuneOpt = False,
    cpu_mechanism: CpuMechanismOpt = "auto",
    nproc: NprocOpt = None,
    oversubscribe: OversubscribeOpt = False,
    timeout: TimeoutOpt = 120.0,
    port: PortOpt = 0,
    json_path: JsonOpt = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", metavar="FILE.png", rich_help_panel=OUTPUT,
        help="Also plot step time per size (plot extra).")] = None,
    save_baseline: Annotated[Path | None, typer.Option(
        "--save-baseline", metavar="FILE", rich_help_panel=OUTPUT,
        help="Write this run's JSON to FILE.")] = None,
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", metavar="FILE", rich_help_panel=OUTPUT,
        help="Compare with FILE; exit 1 on a regression.")] = None,
    max_regression: Annotated[float, typer.Option(
        metavar="FRACTION", min=0.0, rich_help_panel=OUTPUT,
        help="Ratio growth allowed (0.10: 10%).")] = 0.10,
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
    fake_files = check_fakes(fakes)
    chosen = parse_modes(modes)
    from aclcap.errors import UsageError
    from aclcap.graph.options import parse_cpu_mechanism, parse_graph_mode

    check_graph_mode(graph_mode, several=True)
    graph_modes, splits = parse_graph_mode(graph_mode, split_ops, several=True)
    mechanism = parse_cpu_mechanism(cpu_mechanism)
    if "piecewise" in graph_modes and nproc is not None:
        raise UsageError("--graph-mode piecewise runs one process: leave out --nproc")
    if "piecewise" in graph_modes and "graph" not in chosen:
        raise UsageError("--graph-mode piecewise times graph replay: keep graph in --modes")
    resolved = resolve_device(device)  # auto asks torch whether cuda is there: last
    if nproc is not None:
        check_nproc(nproc, resolved, oversubscribe)
        from aclcap import _forkserver

        _forkserver.start()  # the ranks' server imports torch while this process does
    if splits:
        from aclcap.bench.run import default_model

        check_split_ops(model or default_model(), splits)  # needs the model's op libraries
    options = BenchOptions(
        model=str(model) if model else None, shapes=tuple(sizes) if sizes is not None else None,
        device=device, dtype=dtype, max_autotune=max_autotune, nproc=nproc, timeout=timeout,
        port=port, modes=chosen, rounds=rounds, pad=pad, profile=profile,
        min_time_s=min_time, max_time_s=max_time, graph_mode=graph_modes, split_ops=splits,
        cpu_mechanism=mechanism, fakes=fake_files)
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
            from aclcap.bench.opfloor import bound_op_floors
            from aclcap_ops import load, opbench

            load()
            advance("timing the bundled ops", 0, 0)
            measured = opbench.measure_ops(opbench.DEFAULT_SIZES)
            advance("timing the cache floors of the ops whose bytes fit in a cache", 0, 0)
            op_rows = bound_op_floors(measured)
    doc = bench_report.to_document(result, opbench_report.to_dicts(op_rows))
    for path in (json_path, save_baseline):
        if path:
            write_json(str(path), doc)
    console = console_for(json_path)
    for part in bench_report.render(result, console.width):
        console.print(part)
    if op_rows:
        console.print(opbench_report.render(op_rows, console.width))
        console.print(bench_report.op_floor_line(op_rows))
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
    if result.stale:  # a wrong result timed is no speedup: CI must not pass it
        raise typer.Exit(EXIT_FAILED)
    raise typer.Exit(EXIT_INTERRUPTED if result.interrupted else EXIT_OK)
