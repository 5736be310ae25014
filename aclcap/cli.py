"""The aclcap command line: parse arguments, call one library function, print its result.

Bad input raises UsageError, printed as one line with exit code 2 (--debug shows the
traceback); a failed check exits 1 (../shared/README.md section 4).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from aclcap.errors import UsageError

app = typer.Typer(
    help="Check custom PyTorch ops for graph mode: meta impls, torch.compile tracing, "
    "device-graph capture (aclgraph / CUDA graph / AOTInductor) and benchmarks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
_err = Console(stderr=True)
_debug = False

JsonOpt = Annotated[
    str | None,
    typer.Option("--json", metavar="PATH",
                 help="Also write the results as one JSON document to PATH ('-' for stdout)."),
]


@app.callback()
def _options(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line "
                                        "errors.")] = False,
) -> None:
    global _debug
    _debug = debug


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=_err, transient=True)


def _stepper(progress: Progress) -> Callable[[str, int, int], None]:
    """A task on `progress` and the `on_progress(message, done, total)` callback that drives
    it, as run_capture and run_bench report their steps (total 0: indeterminate)."""
    task = progress.add_task("loading the model file", total=None)

    def advance(message: str, done: int, total: int) -> None:
        progress.update(task, description=message, completed=done, total=total or None)

    return advance


@app.command()
def build(
    clean: Annotated[bool, typer.Option("--clean", help="Delete the build folder first.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the compiler commands.")] = False,
    build_dir: Annotated[Path | None, typer.Option("--build-dir", help="Where to build "
                         "(default: $ACLCAP_BUILD_DIR, else build/ of the checkout).")] = None,
    src: Annotated[Path | None, typer.Option("--src", metavar="DIR", help="Op library sources "
                   "(a folder with csrc/*.cpp). Default: the bundled ops/.")] = None,
    json_path: JsonOpt = None,
) -> None:
    """Build the kernels in ops/ into a loadable op library (incremental; per-backend skip
    reasons). Exit 2 on a compile error, with the compiler's first error lines."""
    from aclcap import report
    from aclcap.build import build as run_build

    with _progress() as progress:
        task = progress.add_task("building", total=1)

        def started(name: str) -> None:
            progress.update(task, description=f"compiling {name} target (ninja)")

        result = run_build(build_dir, clean=clean, verbose=verbose, on_target=started, src=src)
        progress.update(task, completed=1)
    if json_path:
        report.write_json(json_path, report.document("build", "cpu", result.rows(),
                                                     build_dir=result.build_dir))
    console = report.console_for(json_path)
    console.print(report.build_table(result))
    cpu = result.targets[0]
    if not result.ok:
        _err.print(f"[red]error:[/] building ops/ failed:\n{cpu.reason}")
        raise typer.Exit(2)


@app.command("check-meta")
def check_meta(
    paths: Annotated[list[Path] | None, typer.Argument(
        metavar="[PATH ...]", help="With --lint: files or folders to lint (default: ops/).")
    ] = None,
    lint: Annotated[bool, typer.Option(
        "--lint", help="Only lint the sources of meta impls for concrete sizes (size(), "
        "numel(), at::empty({...}), int(t.shape[i]), .item()); honours `symbolic-meta-ok:` "
        "comments. Exit 1 on any finding.")] = False,
    lib: Annotated[list[str] | None, typer.Option(
        "--lib", metavar="PATH_OR_MODULE",
        help="Op library to load: a .so, a .py file or a module name; repeat for several, "
        "loaded in order. Default: the bundled library (aclcap_ops).")] = None,
    namespace: Annotated[list[str] | None, typer.Option(
        "--namespace", metavar="NS",
        help="Op namespace to check; repeat for several. Default: those the libraries "
        "registered.")] = None,
    device: Annotated[str, typer.Option(
        help="Where real kernels run: auto (npu > cuda > cpu), cpu, cuda or npu.")] = "auto",
    timeout: Annotated[float, typer.Option(help="Seconds one op's checks may take before it "
                                           "is reported as timed out.")] = 60.0,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Turn warnings (a `!` on an argument the kernel never writes) into "
        "failures.")] = False,
    emit_stubs: Annotated[Path | None, typer.Option(
        "--emit-stubs", metavar="FILE",
        help="Write a register_fake stub for every op without a meta impl to FILE; load it "
        "back with --lib FILE.")] = None,
    json_path: JsonOpt = None,
) -> None:
    """List every registered op of the namespaces and check each one's meta impl against
    the real kernel: opcheck, output shapes/dtypes/strides, mutations vs the schema's `!`,
    and torch.compile(fullgraph=True, dynamic=True). Exit 1 if any is missing or failing."""
    from aclcap import report

    if lint or paths:
        if not lint:
            raise UsageError("PATH arguments are for --lint: add --lint, or drop the paths")
        _lint(paths, json_path)
        return
    from aclcap.devices import resolve_device
    from aclcap.libload import BUNDLED
    from aclcap.metacheck import STATUSES
    from aclcap.metacheck import check_meta as run_check
    from aclcap.stubs import emit_stubs as write_stubs

    resolved = resolve_device(device)
    if emit_stubs is not None and not emit_stubs.parent.exists():
        raise UsageError(f"--emit-stubs {emit_stubs}: folder {emit_stubs.parent} does not exist")
    with _progress() as progress:
        task = progress.add_task("loading op libraries", total=None)

        def started(total: int) -> None:
            progress.update(task, description="checking ops (real kernels in a worker)",
                            total=total)

        def done(op: str) -> None:
            progress.update(task, advance=1, description=f"checked {op}")

        result = run_check(lib or [BUNDLED], namespace, resolved, timeout, strict,
                           on_start=started, on_done=done)
    console = report.console_for(json_path)
    if json_path:
        counts = {s: result.count(s) for s in STATUSES}
        report.write_json(json_path, report.document("check-meta", resolved, result.rows(),
                                                     namespaces=result.namespaces,
                                                     summary=counts))
    console.print(report.meta_table(result))
    console.print(result.summary())
    if emit_stubs is not None:
        written = write_stubs(result.ops, str(emit_stubs))
        console.print(f"wrote {len(written)} register_fake stub(s) to {emit_stubs}"
                      + (f": {', '.join(written)}" if written else ""))
    raise typer.Exit(result.exit_code)


def _plan(budget: int | None, histogram: Path | None, max_size: int,
          json_path: str | None) -> None:
    from aclcap import report
    from aclcap.plan import expected_waste, load_histogram, plan_sizes, vllm_default_sizes

    if budget is None:
        raise UsageError("--plan-sizes needs --budget GRAPHS (how many sizes can be captured)")
    if max_size < 1:
        raise UsageError(f"--max-size {max_size}: give a positive batch size")
    weights = load_histogram(str(histogram)) if histogram else \
        {b: 1.0 for b in range(1, max_size + 1)}
    chosen = plan_sizes(weights, budget)
    default = vllm_default_sizes(max(weights))
    doc = {"budget": budget, "distribution": str(histogram) if histogram else
           f"uniform 1..{max_size}", "sizes": chosen, "expected_waste": expected_waste(
               chosen, weights), "vllm_default_sizes": default,
           "vllm_default_waste": expected_waste(default, weights)}
    if json_path:
        report.write_json(json_path, report.document("capture --plan-sizes", "any", [doc]))
    console = report.console_for(json_path)
    for line in report.plan_lines(doc):
        console.print(line, highlight=False)


def _lint(paths: list[Path] | None, json_path: str | None) -> None:
    from aclcap import report
    from aclcap.build import ops_dir
    from aclcap.lint import lint

    targets = paths or [ops_dir()]
    missing = [p for p in targets if not p.exists()]
    if missing:
        raise UsageError(f"--lint {missing[0]}: no such file or folder")
    findings = lint(targets)
    if json_path:
        report.write_json(json_path, report.document("check-meta --lint", "cpu",
                                                     [f.row() for f in findings]))
    console = report.console_for(json_path)
    if findings:
        console.print(report.lint_table(findings))
    console.print(f"{len(findings)} concrete-size use(s) in meta impls under "
                  f"{', '.join(str(p) for p in targets)}", highlight=False)
    raise typer.Exit(1 if findings else 0)


DeviceOpt = Annotated[str, typer.Option(
    help="auto (npu > cuda > cpu), cpu (AOTInductor), cuda (CUDA graphs) or npu (aclgraph).")]
DtypeOpt = Annotated[str, typer.Option(help="float32, bfloat16 or float16.")]
ShapesOpt = Annotated[str | None, typer.Option(
    "--shapes", metavar="1,2,4,8", help="Sizes (tokens per step) to capture; default: the "
    "model file's SHAPES, else 1,2,4,8.")]


def _quiet_torch() -> None:
    """torch.compile logs every graph break as a warning and torch.export dumps the graph on
    failure; the report lists each once, so they are silenced unless --debug."""
    if not _debug:
        import logging
        import warnings

        import torch

        torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR,
                                export=logging.CRITICAL)
        warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")


@app.command()
def capture(
    model: Annotated[Path | None, typer.Argument(metavar="MODEL.py", help="A model file: "
                     "defines build_model(device, dtype) and make_inputs(size, device, "
                     "dtype).")] = None,
    shapes: ShapesOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    fullgraph: Annotated[bool, typer.Option("--fullgraph", help="Fail on any graph break.")
                         ] = False,
    pad: Annotated[bool, typer.Option("--pad", help="Also replay every size between capture "
                   "sizes, padded up to the next capture size, against unpadded eager.")] = False,
    bisect: Annotated[bool, typer.Option("--bisect", help="On a mismatch, name the first node "
                      "of the traced graph whose compiled output diverges from eager.")] = False,
    plan_sizes: Annotated[bool, typer.Option("--plan-sizes", help="Only plan: choose the capture "
                          "sizes that minimize expected padded tokens within --budget graphs "
                          "(no MODEL.py needed).")] = False,
    budget: Annotated[int | None, typer.Option(help="With --plan-sizes: how many graphs fit "
                      "(on Ascend about 1800 streams / (layers + 1)).")] = None,
    sizes_histogram: Annotated[Path | None, typer.Option(
        "--sizes-histogram", metavar="FILE", help="With --plan-sizes: batch sizes seen, as "
        "JSON {\"size\": count} or lines `size count`; default uniform up to --max-size.")
    ] = None,
    max_size: Annotated[int, typer.Option(help="With --plan-sizes and no histogram: the "
                        "largest batch size.")] = 256,
    json_path: JsonOpt = None,
) -> None:
    """Trace MODEL.py with torch.compile (graph breaks, custom ops in and out of graphs),
    capture one graph per size (aclgraph / cudagraph / aoti), replay on fresh inputs and
    compare outputs and mutated inputs with eager. Exit 1 on any mismatch or capture
    failure, or a graph break with --fullgraph."""
    from aclcap import report
    from aclcap.capture import run_capture
    from aclcap.model import parse_shapes

    if plan_sizes:
        _plan(budget, sizes_histogram, max_size, json_path)
        return
    if model is None:
        raise UsageError("capture needs MODEL.py (or --plan-sizes to only plan sizes)")
    sizes = parse_shapes(shapes) if shapes is not None else None
    _quiet_torch()
    with _progress() as progress:
        result = run_capture(str(model), sizes, device, dtype, fullgraph, pad, bisect,
                             _stepper(progress))
    if json_path:
        report.write_json(json_path, report.document(
            "capture", result.device, result.result_rows(), model=str(model),
            dtype=result.dtype, mechanism=result.mechanism, trace=result.trace.to_dict(),
            backend=result.backend, bisect=result.bisect, totals=result.totals()))
    console = report.console_for(json_path)
    console.print(report.capture_table(result))
    console.print(report.mechanism_line(result), highlight=False)
    if line := report.totals_line(result):
        console.print(line, highlight=False)
    for line in report.trace_lines(result):
        console.print(line, highlight=False, markup=False)
    if fullgraph and result.trace.graph_breaks:
        console.print("[red]--fullgraph: the model does not trace as one graph[/]")
    raise typer.Exit(result.exit_code)


@app.command()
def bench(
    model: Annotated[Path | None, typer.Argument(metavar="[MODEL.py]", help="A model file; "
                     "default: examples/tiny_llama.py.")] = None,
    shapes: ShapesOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    modes: Annotated[str, typer.Option(help="Comma-separated: eager (plain module), compiled "
                     "(torch.compile, inductor), graph (aclgraph / cudagraph / aoti replay).")
                     ] = "eager,compiled,graph",
    rounds: Annotated[int, typer.Option(help="Interleaved rounds (at least 5); medians and "
                      "p90 are over rounds.")] = 7,
    plot: Annotated[Path | None, typer.Option("--plot", metavar="FILE.png", help="Also plot "
                    "step time against size, one line per mode (needs the plot extra).")
                    ] = None,
    save_baseline: Annotated[Path | None, typer.Option("--save-baseline", metavar="FILE",
                             help="Write this run's JSON document to FILE.")] = None,
    baseline: Annotated[Path | None, typer.Option("--baseline", metavar="FILE", help="Compare "
                        "ratios (mode/eager, kernel/reference) with FILE; exit 1 on a "
                        "regression.")] = None,
    max_regression: Annotated[float, typer.Option(help="Allowed growth of a ratio over the "
                              "baseline (0.10 = 10%).")] = 0.10,
    ops: Annotated[bool, typer.Option("--ops", help="Also time every bundled op against its "
                   "eager reference and the memory-traffic floor.")] = False,
    pad: Annotated[bool, typer.Option("--pad", help="Also time each size between capture "
                   "sizes on its own graph and padded onto the next one.")] = False,
    json_path: JsonOpt = None,
) -> None:
    """Time eager vs compiled vs graph replay per size, interleaved in rounds in one process:
    step median and p90, host and device time, launches per step, speedup vs eager. Exit 1
    when --baseline finds a regression."""
    from aclcap import report
    from aclcap.bench import load_baseline, parse_modes, regressions, run_bench
    from aclcap.model import parse_shapes

    sizes = parse_shapes(shapes) if shapes is not None else None
    chosen = parse_modes(modes)
    baseline_doc = load_baseline(str(baseline)) if baseline is not None else None
    _quiet_torch()
    with _progress() as progress:
        advance = _stepper(progress)
        result = run_bench(str(model) if model else None, sizes, device, dtype, chosen, rounds,
                           advance, pad)
        op_rows = []
        if ops and not result.interrupted:
            from aclcap import opbench

            advance("timing the bundled ops", 0, 0)
            op_rows = opbench.rows_as_dicts(opbench.measure_ops(opbench.DEFAULT_SIZES))
    doc = report.document("bench", result.device, result.result_rows(), model=result.model,
                          dtype=result.dtype, mechanism=result.mechanism, rounds=result.rounds,
                          interrupted=result.interrupted, ops=op_rows)
    for path in (json_path, save_baseline):
        if path:
            report.write_json(str(path), doc)
    console = report.console_for(json_path)
    console.print(report.bench_table(result))
    for line in report.bench_lines(result):
        console.print(line, highlight=False)
    if op_rows:
        console.print(report.ops_table(op_rows))
    if plot is not None:
        from aclcap.plot import plot_bench

        plot_bench(result, str(plot))
        console.print(f"plot written to {plot}")
    if baseline_doc is not None:
        found = regressions(doc, baseline_doc, max_regression)
        for line in found:
            console.print(f"[red]regression:[/] {line}", highlight=False)
        if found:
            raise typer.Exit(1)
        console.print(f"no regression against {baseline} (max {max_regression:.0%})")
    raise typer.Exit(130 if result.interrupted else 0)


def main() -> None:
    """Console entry point: one-line errors, exit 2, unless --debug."""
    try:
        app()
    except UsageError as exc:
        if _debug:
            raise
        _err.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        _err.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        if _debug:
            raise
        from aclcap.errors import first_line

        _err.print(f"[red]internal error:[/] {first_line(exc)} (rerun with --debug for the "
                   "traceback)", highlight=False, soft_wrap=True)
        sys.exit(2)
