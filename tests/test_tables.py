"""Tables that fit: at 80 columns no header or cell of bench, capture or check-meta is cut
(no "…", no line past 80) and check-meta takes at most 3 lines per op; from 120 columns the
wide detail (schema, mechanism, reasons columns) is back. Reports come from the library
calls the CLI makes; the widest cases are those reports with their fields pushed to the
extremes (ranks, padding, logits, failures, large numbers)."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console, RenderableType

from aclcap.bench.options import BenchOptions
from aclcap.bench.run import BenchReport, run_bench
from aclcap.capture.options import CaptureOptions
from aclcap.capture.run import CaptureReport, run_capture
from aclcap.meta.options import CheckMetaOptions
from aclcap.meta.runner import MetaReport, check_meta
from aclcap.report import bench as bench_report
from aclcap.report import capture as capture_report
from aclcap.report import check_meta as meta_report
from aclcap.report import opbench as ops_report
from aclcap.report import profile as profile_report
from aclcap.status import Status
from aclcap_ops import opbench
from tests.conftest import BADOPS, ROOT

ONE_LINEAR = str(ROOT / "examples" / "one_linear.py")  # the fastest model to capture
NARROW, WIDE = 80, 120


def render(table: RenderableType | list[RenderableType], width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    for part in table if isinstance(table, list) else [table]:
        console.print(part)
    return console.export_text()


def assert_fits(text: str, width: int, headers: tuple[str, ...]) -> None:
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert "…" not in text, text
    for header in headers:
        assert header in text, (header, text)


@pytest.fixture(scope="module")
def captured() -> CaptureReport:
    return run_capture(CaptureOptions(model=ONE_LINEAR, shapes=(1, 2), device="cpu"))


@pytest.fixture(scope="module")
def benched(captured: CaptureReport) -> BenchReport:
    """After `captured`: the graph mode replays the artifact that capture compiled."""
    return run_bench(BenchOptions(model=ONE_LINEAR, shapes=(1, 2), device="cpu",
                                  modes=("eager", "graph"), rounds=5, profile=True,
                                  min_time_s=0.0))


@pytest.fixture(scope="module")
def checked() -> MetaReport:
    return check_meta(CheckMetaOptions([str(BADOPS)], ["aclcap_test"], "cpu"))


def widest_capture(real: CaptureReport) -> CaptureReport:
    """Two ranks, a padded size, the logits columns, a failure and a large model."""
    reason = ("output 0 differs from eager on replay 2 (max abs err 0.25): state that leaks "
              "between replays")
    rows = [replace(real.rows[0], size=size, rank=rank, padded_to=padded, capture_us=12345.6e3,
                    memory_bytes=20 * 2**30, max_abs_err=0.25, max_rel_err=1.5e-3,
                    token_agreement=0.875, max_logprob_err=2.5e-5, status=Status.FAIL,
                    reasons=[reason]) for size, padded in ((1, None), (3, 4)) for rank in (0, 1)]
    return replace(real, backend=replace(real.backend, ranks=2), rows=rows, rank_rows=rows)


def widest_bench(real: BenchReport) -> BenchReport:
    """Every mode, two ranks, device times and six-digit microseconds."""
    rows = [replace(real.rows[0], mode=mode, mechanism=mechanism, step_median_us=123456.7,
                    step_p90_us=234567.8, host_us=12345.6, device_us=111111.1, launches=12345,
                    speedup_vs_eager=123.4)
            for mode, mechanism in (("eager", "eager"), ("compiled", "inductor"),
                                    ("graph", "cudagraph"), ("padded", "cudagraph"))]
    return replace(real, device="cuda", mechanism="cudagraph", ranks=2, rows=rows)


def op_rows() -> list[opbench.OpBenchRow]:
    """Every bundled op at a large shape, with five-digit times."""
    return [
        opbench.OpBenchRow(op, "bfloat16", (4096, 4096), (4096, 8, 128), 2**27, 12345.6,
                           23456.7, 1234.5, 123.4, 12345.6, 123.4, 12345.6, 12.34, 1234.5,
                           23456.7)
        for op in opbench.CASES]


def test_capture_fits_80_columns_with_reasons_below(captured):
    assert_fits(render(capture_report.capture_table(captured, False, NARROW), NARROW), NARROW,
                ("size", "cap ms", "MiB", "abs err", "rel err", "status"))
    text = render(capture_report.capture_table(widest_capture(captured), True, NARROW), NARROW)
    assert_fits(text, NARROW, ("rank", "tokens", "lp err", "3→4", "20480", "fail"))
    assert "sizes 1 (rank 0), 1 (rank 1), 3 (rank 0), 3 (rank 1)" in text
    assert "output 0 differs from eager on replay 2" in text  # once, under the table
    assert text.count("differs") == 1


def test_capture_keeps_its_columns_at_120(captured):
    text = render(capture_report.capture_table(widest_capture(captured), True, WIDE), WIDE)
    assert_fits(text, WIDE, ("mechanism", "reasons", "(pad→4)", "(as size 1)"))


def test_bench_fits_80_columns(benched):
    for bench in (benched, widest_bench(benched)):
        text = render(bench_report.bench_table(bench, NARROW), NARROW)
        assert_fits(text, NARROW, ("size", "mode", "med µs", "p90 µs", "host µs", "dev µs",
                                   "launch", "vs eager", f"(graph mode: {bench.mechanism})"))
    assert "123457" in text and "compiled" in text and "123x" in text


def test_bench_keeps_its_columns_at_120(benched):
    text = render(bench_report.bench_table(widest_bench(benched), WIDE), WIDE)
    assert_fits(text, WIDE, ("mechanism", "inductor", "launches/step", "each round the "
                             "slowest rank's"))


def test_profile_fits_80_columns(benched):
    for size in (1, 2):
        text = render(profile_report.profile_table(benched, size), NARROW)
        assert_fits(text, NARROW, ("eager", "graph", "µs", "(not seen by the profiler)"))


def test_ops_fit_80_columns_and_show_all_at_ops_wide():
    text = render(ops_report.render(op_rows(), NARROW), NARROW)
    assert_fits(text, NARROW, ("op", "dtype", "shape", "kern µs", "speedup", "/ floor",
                               "get_masked_input_and_mask", "4096x8x128", "bf16", "12346"))
    wide = render(ops_report.render(op_rows(), ops_report.OPS_WIDE), ops_report.OPS_WIDE)
    assert_fits(wide, ops_report.OPS_WIDE, ("reference", "F.rms_norm", "GB/s", "alloc"))


def test_check_meta_fits_80_columns_in_3_lines_per_op(checked):
    text = render(meta_report.render(checked, NARROW, every=True), NARROW)
    assert_fits(text, NARROW, ("op / meta impl", "kernels", "status", "not_exercised",
                               "register_fake (badops.py:47)", "4 samples"))
    lines = text.splitlines()
    body = lines[next(i for i, line in enumerate(lines) if line.startswith("┡")) + 1:
                 next(i for i, line in enumerate(lines) if line.startswith("└")) + 1]
    assert len(body) <= 3 * len(checked.results)
    rules = [i for i, line in enumerate(body) if line[0] in "├└"]
    assert len(rules) == len(checked.results)
    assert all(b - a <= 3 for a, b in zip([-1, *rules], rules, strict=False))
    assert all(r.op in text for r in checked.results)
    # below the table, folded anywhere (rich may break after the hyphen): compare sans spaces
    assert "nometaimpl:torch.compilegraph-breakshere" in "".join(text.split())


def test_check_meta_keeps_schema_and_reasons_at_120(checked):
    text = render(meta_report.render(checked, WIDE, every=True), WIDE)
    assert_fits(text, WIDE, ("op / schema", "meta impl", "reasons", "(Tensor x) -> Tensor",
                             "samples: 2 declared x 2"))


def big_library(real: MetaReport, count: int = 250) -> MetaReport:
    """A vendor library's shape: the real rows among many not_exercised and passing ones
    with long names and long kernel lists."""
    template = next(r for r in real.results if r.status == Status.NOT_EXERCISED)
    extra = [replace(template, op=f"npu::npu_fused_infer_attention_v{i}.default",
                     kernels=["CPU", "Meta", "CompositeExplicitAutograd"] if i % 2 else ["CPU"],
                     status=Status.NOT_EXERCISED if i % 3 else Status.PASS,
                     findings=template.findings if i % 3 else [], check_s=0.1 * i)
             for i in range(count)]
    return replace(real, results=[*extra[:count // 2], *real.results, *extra[count // 2:]])


def _line_of(text: str, words: str) -> bool:
    return any(words in line for line in text.splitlines())


@pytest.mark.parametrize("width", [NARROW, WIDE])
def test_check_meta_prints_problems_first_and_counts_the_rest(checked, width):
    """258 ops: the failing and warning rows only, failing first, op names whole; one line
    counts the rows not shown per status; --all prints every row; JSON keeps them all."""
    big = big_library(checked)
    text = render(meta_report.render(big, width), width)
    problems = [r for r in big.results if meta_report.problem(r)]
    assert problems and len(problems) < 15
    assert_fits(text, width, ("not shown: ", "(--all prints every row)"))
    for r in problems:
        assert _line_of(text, r.op), (r.op, text)
    assert "npu_fused_infer_attention" not in text
    shown = [r.op for r in meta_report.shown_rows(big, every=False)]
    failing = [r.op for r in big.results if r.status in {"fail", "missing", "crashed", "timeout"}]
    assert shown[:len(failing)] == [op for op in shown if op in failing]
    hidden = {s: sum(r.status == s and not meta_report.problem(r) for r in big.results)
              for s in ("pass", "not_exercised")}
    assert f"{hidden['pass']} pass" in text and f"{hidden['not_exercised']} not_exercised" in text
    every = render(meta_report.render(big, width, every=True), width)
    assert all(_line_of(every, r.op) for r in big.results) and "not shown" not in every
    assert len(meta_report.to_document(big, "cpu")["results"]) == len(big.results)


def test_slowest_ops_line_fits_the_width(checked):
    big = big_library(checked)
    line = meta_report.durations_line(big, width=NARROW)  # one op at least, then what fits
    assert line.startswith("slowest ops") and ".default 24.9 s" in line and ", " not in line
    assert_fits(render(line, NARROW), NARROW, ("slowest ops",))
    assert meta_report.durations_line(big).count(".default") == 5  # no width: all five


@pytest.mark.parametrize("width", [40, NARROW, WIDE])
def test_lint_finding_is_path_line_col_on_one_line_at_any_width(width):
    from aclcap.meta.lint import lint
    from aclcap.report import lint as lint_report

    findings = lint([ROOT / "tests" / "fixtures" / "lint"])
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(lint_report.render(findings, width), crop=False)
    text = console.export_text()
    for f in findings:
        location = f"{f.file.replace(str(ROOT) + '/', '')}:{f.line}:{max(f.column, 1)}"
        assert _line_of(text, location), (location, text)


def test_compiles_line_names_no_backend_it_does_not_know(captured):
    from aclcap.graph.backends.base import BackendSummary

    lines = capture_report.trace_lines(replace(captured, backend=BackendSummary()))
    compiles = next(line for line in lines if line.startswith("compiles at sizes"))
    assert "None" not in compiles and compiles.endswith("(torch.compile)"), compiles


def test_check_meta_where_every_row_passes_still_says_what_it_checked():
    from aclcap.meta.runner import MetaResult

    rows = [MetaResult("ns::a.default", "ns::a(Tensor x) -> Tensor", ["CPU"], "register_fake",
                       Status.PASS)]
    text = render(meta_report.render(MetaReport(rows, ["ns"]), 80), 80)
    assert text.splitlines()[0] == "aclcap check-meta: namespaces ns"
    assert "not shown: 1 pass (--all prints every row)" in text
