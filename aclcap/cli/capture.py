"""`aclcap capture` (and `--plan-sizes`): parse, capture, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aclcap.capture.options import CaptureOptions
from aclcap.cli._errors import handle_crashes
from aclcap.cli._options import (
    CHECKS,
    GRAPH,
    OUTPUT,
    CpuMechanismOpt,
    DeviceOpt,
    DtypeOpt,
    FakesOpt,
    GraphModeOpt,
    JsonOpt,
    MaxAutotuneOpt,
    NprocOpt,
    OversubscribeOpt,
    PerRankOpt,
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
from aclcap.errors import UsageError
from aclcap.graph.options import parse_cpu_mechanism, parse_graph_mode

PLAN = "Size planning (--plan-sizes)"


@handle_crashes
def capture(
    model: Annotated[Path | None, typer.Argument(
        metavar="MODEL.py", help="Defines build_model(device, dtype) and make_inputs(size, "
        "device, dtype).")] = None,
    shapes: ShapesOpt = None,
    fakes: FakesOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    fullgraph: Annotated[bool, typer.Option(
        "--fullgraph/--allow-breaks", rich_help_panel=CHECKS,
        help="Fail on any graph break, as vLLM does (default).")] = True,
    pad: Annotated[bool, typer.Option(
        "--pad", rich_help_panel=CHECKS,
        help="Also replay the sizes between, padded up.")] = False,
    bisect: Annotated[bool, typer.Option(
        "--bisect", rich_help_panel=CHECKS,
        help="On a mismatch, name the first node that diverges.")] = False,
    fail_on_recompile: Annotated[bool, typer.Option(
        "--fail-on-recompile", rich_help_panel=CHECKS,
        help="Exit 1 when a later size compiles again.")] = False,
    graph_mode: GraphModeOpt = "full",
    split_ops: SplitOpsOpt = None,
    compile_backend: Annotated[str | None, typer.Option(
        "--compile-backend", metavar="NAME", rich_help_panel=GRAPH,
        help="torch.compile backend: a name or module:function.")] = None,
    max_autotune: MaxAutotuneOpt = False,
    cpu_mechanism: CpuMechanismOpt = "auto",
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", rich_help_panel=GRAPH,
        help="cpu: trace and compile afresh, not from the caches.")] = False,
    nproc: NprocOpt = None,
    oversubscribe: OversubscribeOpt = False,
    timeout: TimeoutOpt = 120.0,
    port: PortOpt = 0,
    per_rank: PerRankOpt = False,
    plan_sizes: Annotated[bool, typer.Option(
        "--plan-sizes", rich_help_panel=PLAN,
        help="Only choose capture sizes for a graph budget.")] = False,
    budget: Annotated[int | None, typer.Option(
        metavar="GRAPHS", min=1, rich_help_panel=PLAN,
        help="Graphs that fit (default: from --layers).")] = None,
    layers: Annotated[int | None, typer.Option(
        metavar="N", min=1, rich_help_panel=PLAN, help="The model's layers.")] = None,
    comm_domains: Annotated[int, typer.Option(
        metavar="N", min=0, rich_help_panel=PLAN,
        help="Communication domains of size > 1 (TP, DP).")] = 0,
    hccl_aiv: Annotated[bool, typer.Option(
        "--hccl-aiv", rich_help_panel=PLAN, help="HCCL's AIV expansion (fewer streams).")
    ] = False,
    sizes_histogram: Annotated[Path | None, typer.Option(
        "--sizes-histogram", metavar="FILE", rich_help_panel=PLAN,
        help="Batch sizes seen: JSON, or `size count` lines.")] = None,
    max_size: Annotated[int, typer.Option(
        metavar="N", min=1, rich_help_panel=PLAN,
        help="Without a histogram: the largest size.")] = 256,
    json_path: JsonOpt = None,
    fmt: Annotated[str, typer.Option(
        "--format", metavar="FORMAT", rich_help_panel=OUTPUT,
        help="table, or github (adds ::error annotations).")] = "table",
    junit_xml: Annotated[Path | None, typer.Option(
        "--junit-xml", metavar="PATH", rich_help_panel=OUTPUT,
        help="Also write JUnit XML: a testcase per size.")] = None,
) -> None:
    """Trace MODEL.py with torch.compile (graph breaks, custom ops in and out of graphs),
    capture one graph per size (aclgraph / cudagraph / aoti), replay on fresh inputs and
    compare outputs and mutated inputs with eager. Every compile across the sizes is
    listed with the guard that failed. A graph break anywhere fails every size, as vLLM's
    fullgraph=True compile does, piecewise too (--allow-breaks captures around breaks).
    Exit 1 on any mismatch, capture failure or graph break, or a recompile with
    --fail-on-recompile."""
    from aclcap.devices import check_nproc, resolve_device
    from aclcap.loading.model_file import parse_shapes
    from aclcap.report import capture as capture_report
    from aclcap.report.layout import console_for, write_json

    check_output_path("--json", json_path)
    check_output_path("--junit-xml", junit_xml)
    if fmt not in ("table", "github"):
        raise UsageError(f"--format {fmt}: capture prints table or github")
    if plan_sizes:
        if budget is None and layers is None:
            raise UsageError("--plan-sizes needs --budget GRAPHS (how many sizes can be "
                             "captured) or --layers L [--comm-domains D] to derive it")
        if budget is None:
            from aclcap.capture.plan import ascend_graph_budget

            budget = ascend_graph_budget(layers, comm_domains, hccl_aiv)
            if budget < 1:
                raise UsageError(f"--layers {layers} --comm-domains {comm_domains}: no graph "
                                 "fits the Ascend stream budget")
        _plan(budget, sizes_histogram, max_size, json_path)
        return
    if model is None:
        raise UsageError("capture needs MODEL.py (or --plan-sizes to only plan sizes)")
    # Every check on the arguments alone comes before torch and the model are imported.
    check_model_path(model)
    sizes = parse_shapes(shapes) if shapes is not None else None
    check_dtype_name(dtype)
    fake_files = check_fakes(fakes)
    check_graph_mode(graph_mode)
    mode, splits = parse_graph_mode(graph_mode, split_ops)
    mechanism = parse_cpu_mechanism(cpu_mechanism)
    if mode == "piecewise" and nproc is not None:
        raise UsageError("--graph-mode piecewise runs one process: leave out --nproc")
    resolved = resolve_device(device)  # auto asks torch whether cuda is there: last
    if nproc is not None:
        check_nproc(nproc, resolved, oversubscribe)
        from aclcap import _forkserver

        _forkserver.start()  # the ranks' server imports torch while this process does
    check_split_ops(model, splits)  # needs the model's op libraries loaded
    from aclcap.capture.run import run_capture

    options = CaptureOptions(
        model=str(model), shapes=tuple(sizes) if sizes is not None else None,
        device=device, dtype=dtype, compile_backend=compile_backend, max_autotune=max_autotune,
        use_cache=not no_cache, nproc=nproc, timeout=timeout, port=port, fullgraph=fullgraph,
        pad=pad, bisect=bisect, fail_on_recompile=fail_on_recompile, graph_mode=mode,
        split_ops=splits, cpu_mechanism=mechanism, fakes=fake_files)
    quiet_torch()
    with progress_bar() as progress:
        advance = stepper(progress)
        if nproc is None:
            result = run_capture(options, advance)
        else:
            from aclcap.capture.ranks import run_capture_ranks

            result = run_capture_ranks(options, lambda phase: advance(f"rank 0: {phase}", 0, 0))
    if json_path:
        write_json(json_path, capture_report.to_document(result))
    console = console_for(json_path)
    for part in capture_report.render(result, console.width, per_rank):
        console.print(part)
    if fmt == "github" or junit_xml is not None:
        from aclcap.report import ci

        ci.write(ci.capture_annotations(result), ci.capture_junit(result),
                 console.file if fmt == "github" else None, junit_xml)
    raise typer.Exit(result.exit_code)


def _plan(budget: int, histogram: Path | None, max_size: int, json_path: str | None) -> None:
    from aclcap.capture.plan import make_plan
    from aclcap.report import plan as plan_report
    from aclcap.report.layout import console_for, write_json

    plan = make_plan(budget, str(histogram) if histogram else None, max_size)
    if json_path:
        write_json(json_path, plan_report.to_document(plan))
    console = console_for(json_path)
    for part in plan_report.render(plan, console.width):
        console.print(part)
