"""`aclcap capture` (and `--plan-sizes`): parse, capture, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from aclcap.cli._errors import handle_errors
from aclcap.cli._options import (
    DeviceOpt,
    DtypeOpt,
    JsonOpt,
    MaxAutotuneOpt,
    NprocOpt,
    OversubscribeOpt,
    PerRankOpt,
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
from aclcap.errors import UsageError


@handle_errors
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
    no_cache: Annotated[bool, typer.Option("--no-cache", help="cpu: compile the AOTI artifact "
                        "afresh instead of reusing the cached one (cache: $ACLCAP_CACHE_DIR, "
                        "else ~/.cache/aclcap; keyed on the exported program).")] = False,
    compile_backend: Annotated[str | None, typer.Option(
        "--compile-backend", metavar="NAME", help="torch.compile backend (a registered name "
        "or module:function): on cuda/npu the one whose code is captured (default inductor on "
        "cuda, aot_eager on npu); on cpu the one used to record recompiles (default eager).")
    ] = None,
    fail_on_recompile: Annotated[bool, typer.Option(
        "--fail-on-recompile", help="Exit 1 when torch.compile compiles again at any size "
        "after the first (counted by Dynamo's counters; each one is listed with its guard).")
    ] = False,
    max_autotune: MaxAutotuneOpt = False,
    nproc: NprocOpt = None,
    oversubscribe: OversubscribeOpt = False,
    timeout: TimeoutOpt = 120.0,
    port: PortOpt = 0,
    per_rank: PerRankOpt = False,
    plan_sizes: Annotated[bool, typer.Option("--plan-sizes", help="Only plan: choose the capture "
                          "sizes that minimize expected padded tokens within --budget graphs "
                          "(no MODEL.py needed).")] = False,
    budget: Annotated[int | None, typer.Option(min=1, help="With --plan-sizes: how many graphs "
                      "fit; default: from --layers and --comm-domains by vllm-ascend's stream "
                      "rule.")] = None,
    layers: Annotated[int | None, typer.Option(min=1, help="With --plan-sizes: the model's layers "
                      "(each graph costs layers + 1 Ascend streams).")] = None,
    comm_domains: Annotated[int, typer.Option(min=0, help="With --plan-sizes: communication "
                            "domains of size > 1 (TP, DP), e.g. 1 for TP 4.")] = 0,
    hccl_aiv: Annotated[bool, typer.Option("--hccl-aiv", help="With --plan-sizes: "
                        "HCCL_OP_EXPANSION_MODE=AIV (fewer streams per domain).")] = False,
    sizes_histogram: Annotated[Path | None, typer.Option(
        "--sizes-histogram", metavar="FILE", help="With --plan-sizes: batch sizes seen, as "
        "JSON {\"size\": count} or lines `size count`; default uniform up to --max-size.")
    ] = None,
    max_size: Annotated[int, typer.Option(min=1, help="With --plan-sizes and no histogram: the "
                        "largest batch size.")] = 256,
    json_path: JsonOpt = None,
) -> None:
    """Trace MODEL.py with torch.compile (graph breaks, custom ops in and out of graphs),
    capture one graph per size (aclgraph / cudagraph / aoti), replay on fresh inputs and
    compare outputs and mutated inputs with eager. Every compile across the sizes is
    listed with the guard that failed. Exit 1 on any mismatch or capture failure, a graph
    break with --fullgraph, or a recompile with --fail-on-recompile."""
    from aclcap import report
    from aclcap.devices import check_nproc, resolve_device
    from aclcap.graph.model import parse_shapes

    check_output_path("--json", json_path)
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
    resolved = resolve_device(device)  # auto asks torch whether cuda is there: last
    if nproc is not None:
        check_nproc(nproc, resolved, oversubscribe)
    from aclcap.capture.run import run_capture

    quiet_torch()
    with progress_bar() as progress:
        if nproc is None:
            result = run_capture(str(model), sizes, device, dtype, fullgraph, pad, bisect,
                                 stepper(progress), use_cache=not no_cache,
                                 compile_backend=compile_backend,
                                 fail_on_recompile=fail_on_recompile,
                                 max_autotune=max_autotune)
        else:
            from aclcap.capture.ranks import run_capture_ranks

            if bisect:
                raise UsageError("--bisect runs in one process: leave out --nproc")
            advance = stepper(progress)
            result = run_capture_ranks(
                str(model), nproc, sizes, device, dtype,
                {"fullgraph": fullgraph, "pad": pad, "use_cache": not no_cache,
                 "compile_backend": compile_backend, "fail_on_recompile": fail_on_recompile,
                 "max_autotune": max_autotune},
                timeout, port, lambda phase: advance(f"rank 0: {phase}", 0, 0))
    if json_path:
        report.write_json(json_path, report.document(
            "capture", result.device, result.result_rows(), model=str(model),
            dtype=result.dtype, mechanism=result.mechanism, trace=result.trace.to_dict(),
            backend=result.backend, bisect=result.bisect, totals=result.totals()))
    console = report.console_for(json_path)
    console.print(report.capture_table(result, per_rank, console.width))
    console.print(report.mechanism_line(result), highlight=False)
    if line := report.totals_line(result):
        console.print(line, highlight=False)
    for line in report.trace_lines(result):
        console.print(line, highlight=False, markup=False)
    for problem in result.cross_rank:
        console.print(f"[red]across ranks:[/] {escape(problem)}", highlight=False)
    if fullgraph and result.trace.graph_breaks:
        console.print("[red]--fullgraph: the model does not trace as one graph[/]")
    raise typer.Exit(result.exit_code)


def _plan(budget: int, histogram: Path | None, max_size: int, json_path: str | None) -> None:
    from aclcap import report
    from aclcap.capture.plan import expected_waste, load_histogram, plan_sizes, vllm_default_sizes

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
