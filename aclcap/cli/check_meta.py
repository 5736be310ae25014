"""`aclcap check-meta` (and `--lint`): parse, check, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aclcap.cli._errors import EXIT_FAILED, EXIT_OK, handle_errors, state
from aclcap.cli._options import (
    CHECKS,
    INPUTS,
    OUTPUT,
    DeviceOpt,
    JsonOpt,
    check_library_option,
    check_output_path,
    progress_bar,
)
from aclcap.errors import UsageError

SYNTHESIS = "Synthesis"


@handle_errors
def check_meta(
    paths: Annotated[list[Path] | None, typer.Argument(
        metavar="PATH", help="With --lint: files or folders (default: aclcap_ops/).")] = None,
    lib: Annotated[list[str] | None, typer.Option(
        "--lib", metavar="LIB", rich_help_panel=INPUTS,
        help="Op library: a .so, a .py or a module; repeatable.")] = None,
    namespace: Annotated[list[str] | None, typer.Option(
        "--namespace", metavar="NS", rich_help_panel=INPUTS,
        help="Op namespace to check; repeatable (default: all).")] = None,
    device: DeviceOpt = "auto",
    samples_from: Annotated[list[Path] | None, typer.Option(
        "--samples-from", metavar="MODEL.py", rich_help_panel=INPUTS,
        help="Take samples from this model's eager step; repeatable.")] = None,
    shapes: Annotated[str | None, typer.Option(
        "--shapes", metavar="1,2,4,8", rich_help_panel=INPUTS,
        help="With --samples-from: the sizes to run its step at.")] = None,
    lint: Annotated[bool, typer.Option(
        "--lint", rich_help_panel=CHECKS,
        help="Only lint meta impl sources for concrete sizes.")] = False,
    timeout: Annotated[float, typer.Option(
        metavar="SECONDS", min=0.1, rich_help_panel=CHECKS,
        help="Seconds one op may take before it times out.")] = 60.0,
    strict: Annotated[bool, typer.Option(
        "--strict", rich_help_panel=CHECKS,
        help="Warnings (a `!` never written) fail too.")] = False,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", rich_help_panel=CHECKS,
        help="Check every op afresh, not from the result cache.")] = False,
    emit_stubs: Annotated[Path | None, typer.Option(
        "--emit-stubs", metavar="FILE", rich_help_panel=SYNTHESIS,
        help="Write a register_fake stub per op without a meta.")] = None,
    synthesize: Annotated[Path | None, typer.Option(
        "--synthesize", metavar="FILE.py", rich_help_panel=SYNTHESIS,
        help="Infer missing or failing metas from kernel calls.")] = None,
    synthesize_cpp: Annotated[Path | None, typer.Option(
        "--synthesize-cpp", metavar="FILE.cpp", rich_help_panel=SYNTHESIS,
        help="The same, as C++ Meta kernels.")] = None,
    synthesize_all: Annotated[bool, typer.Option(
        "--synthesize-all", rich_help_panel=SYNTHESIS,
        help="Synthesize every op; diff the metas there are.")] = False,
    json_path: JsonOpt = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", metavar="FORMAT", rich_help_panel=OUTPUT,
        help="table or github; with --lint also text, json, sarif.")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", metavar="PATH", rich_help_panel=OUTPUT,
        help="With --lint: write the --format output to PATH.")] = None,
    junit_xml: Annotated[Path | None, typer.Option(
        "--junit-xml", metavar="PATH", rich_help_panel=OUTPUT,
        help="Also write JUnit XML: a testcase per op.")] = None,
    every: Annotated[bool, typer.Option(
        "--all", rich_help_panel=OUTPUT,
        help="Print every op's row, not only the problems.")] = False,
) -> None:
    """List every registered op of the namespaces and check each one's meta impl against
    the real kernel: opcheck, output shapes/dtypes/strides, mutations vs the schema's `!`,
    and torch.compile(fullgraph=True, dynamic=True). Exit 1 if any is missing or failing."""
    check_output_path("--json", json_path)
    if lint or paths:
        if not lint:
            raise UsageError("PATH arguments are for --lint: add --lint, or drop the paths")
        if junit_xml is not None:
            raise UsageError("--junit-xml is for check-meta's ops: with --lint use --format "
                             "sarif or github")
        _lint(paths, json_path, fmt, output)
        return
    if output is not None or fmt not in (None, "table", "github"):
        raise UsageError(f"{'--output' if output is not None else '--format ' + str(fmt)} is "
                         "for --lint: check-meta prints --format table or github; use --json "
                         "PATH for its results")
    check_output_path("--junit-xml", junit_xml)
    from aclcap.devices import resolve_device
    from aclcap.loading.libraries import BUNDLED
    from aclcap.loading.model_file import parse_shapes
    from aclcap.meta.options import CheckMetaOptions
    from aclcap.report import check_meta as meta_report
    from aclcap.report.layout import console_for, write_json

    # Every check on the arguments alone comes before torch and the libraries are imported
    # (resolving --device auto asks torch whether cuda is there: last).
    check_output_path("--emit-stubs", emit_stubs)
    for spec in lib or []:
        check_library_option(spec)
    check_output_path("--synthesize", synthesize)
    check_output_path("--synthesize-cpp", synthesize_cpp)
    if synthesize_all and not (synthesize or synthesize_cpp):
        raise UsageError("--synthesize-all re-derives metas into a file: add --synthesize "
                         "FILE.py or --synthesize-cpp FILE.cpp")
    if shapes is not None and not samples_from:
        raise UsageError("--shapes is the sizes --samples-from runs its model at: add "
                         "--samples-from MODEL.py, or drop --shapes")
    sizes = parse_shapes(shapes) if shapes is not None else None
    for model in samples_from or []:
        if model.is_dir():
            raise UsageError(f"--samples-from {model}: is a directory; pass a model file "
                             "(MODEL.py)")
        if not model.is_file():
            raise UsageError(f"--samples-from {model}: no such model file")
    from dataclasses import replace

    from aclcap import _forkserver
    from aclcap.meta.result_cache import expect_all_cached

    options = CheckMetaOptions(
        libs=lib or ([] if samples_from else [BUNDLED]), namespaces=namespace, device=device,
        timeout_s=timeout, strict=strict, samples_from=[str(m) for m in samples_from or []],
        shapes=sizes, use_cache=not no_cache)
    if not (options.use_cache and expect_all_cached(options)) or synthesize or synthesize_cpp:
        _forkserver.start()  # the workers' server imports torch while this process does
    options = replace(options, device=resolve_device(device))
    resolved = options.device
    from aclcap.meta.runner import check_meta as run_check

    with progress_bar() as progress:
        task = progress.add_task("loading op libraries", total=None)

        def started(total: int) -> None:
            progress.update(task, description="checking ops (real kernels in a worker)",
                            total=total)

        def done(op: str) -> None:
            progress.update(task, advance=1, description=f"checked {op}")

        result = run_check(options, on_start=started, on_done=done)
        synthesized = None
        if synthesize or synthesize_cpp:
            from aclcap.meta.synthesize.pipeline import run_synthesis

            progress.update(task, description="synthesizing metas (real kernels in a worker)",
                            completed=0, total=None)
            synthesized = run_synthesis(result, options, synthesize, synthesize_cpp,
                                        synthesize_all, on_done=done)
    console = console_for(json_path)
    if json_path:
        write_json(json_path, meta_report.to_document(result, resolved, synthesized))
    console.print(meta_report.render(result, console.width, every))
    console.print(result.summary())
    if cached := meta_report.cache_line(result):
        console.print(cached, highlight=False, markup=False)
    if durations := meta_report.durations_line(result, width=console.width):
        console.print(durations, highlight=False, markup=False)
    if fmt == "github" or junit_xml is not None:
        from aclcap.report import ci

        ci.write(ci.check_meta_annotations(result), ci.check_meta_junit(result),
                 console.file if fmt == "github" else None, junit_xml)
    if synthesized is not None:
        for line in meta_report.synthesis_lines(synthesized):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    if emit_stubs is not None:
        from aclcap.meta.stubs import emit_stubs as write_stubs  # sympy: only when asked

        written = write_stubs(result.ops, str(emit_stubs))
        console.print(f"wrote {len(written)} register_fake stub(s) to {emit_stubs}"
                      + (f": {', '.join(written)}" if written else "")
                      + ("; stubs are for ops without samples: `--synthesize FILE.py` infers "
                         "real metas from an op's samples" if written else ""))
    if reasons := meta_report.exit_reasons(result, synthesized):
        console.print(f"exit 1: {', '.join(reasons)}", highlight=False, markup=False)
    state.done = True  # every file and line written: no teardown of torch's heap (main)
    raise typer.Exit(EXIT_FAILED if reasons else EXIT_OK)


def _lint(paths: list[Path] | None, json_path: str | None, fmt: str | None,
          output: Path | None) -> None:
    import sys

    from aclcap.report import lint as lint_report

    if fmt is not None and fmt not in lint_report.FORMATS:
        raise UsageError(f"--format {fmt}: not a format; use one of "
                         f"{', '.join(lint_report.FORMATS)}")
    if output is not None and fmt == "table":
        raise UsageError("--output writes text, json, sarif or github: pick one with --format")
    check_output_path("--output", output)
    if output is not None and str(output) == "-":
        output = None
    if fmt is None:
        fmt = "table" if output is None and sys.stdout.isatty() else "text"
    if json_path == "-" and fmt in ("json", "sarif") and output is None:
        raise UsageError(f"--json - and --format {fmt} both want stdout: give one of them a "
                         "file (--json PATH or --output PATH)")
    from aclcap.build import ops_dir
    from aclcap.meta.lint import lint
    from aclcap.report.layout import console_for, write_json

    targets = paths or [ops_dir()]
    missing = [p for p in targets if not p.exists()]
    if missing:
        raise UsageError(f"--lint {missing[0]}: no such file or folder")
    findings = lint(targets)
    if json_path:
        write_json(json_path, lint_report.to_document(findings))
    console = console_for(json_path)
    summary = (f"{len(findings)} concrete-size use(s) in meta impls under "
               f"{', '.join(str(p) for p in targets)}")
    if fmt == "table":
        if findings:
            console.print(lint_report.render(findings, console.width), crop=False)
        console.print(summary, highlight=False)
    elif output is not None:
        output.write_text(lint_report.formatted(findings, fmt))
        console.print(f"{summary}; wrote {fmt} to {output}", highlight=False, soft_wrap=True)
    else:
        # Written as is, never through rich: a terminal's width must not wrap a line, and
        # json/sarif on stdout must be the document alone.
        # Lines go to stderr when --json - takes stdout, as the table does.
        stream = sys.stderr if json_path == "-" else sys.stdout
        stream.write(lint_report.formatted(findings, fmt))
        if fmt in ("text", "github"):
            stream.write(summary + "\n")
    raise typer.Exit(EXIT_FAILED if findings else EXIT_OK)
