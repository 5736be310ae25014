"""Result objects -> rich tables and JSON documents. Both read the same rows, so the printed
table and `--json` never disagree (README: machine-readable output)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

import aclcap
from aclcap.errors import UsageError
from aclcap.status import Status

if TYPE_CHECKING:  # result types only: importing them pulls in torch, which `build` avoids
    from aclcap.bench.run import BenchReport
    from aclcap.build import BuildReport
    from aclcap.capture.run import CaptureReport, CaptureRow
    from aclcap.meta.runner import MetaReport

STATUS_STYLE = {Status.PASS: "green", Status.BUILT: "green", Status.UP_TO_DATE: "green",
                Status.MISSING: "red", Status.FAIL: "red", Status.CRASHED: "red",
                Status.TIMEOUT: "red", Status.NOT_EXERCISED: "yellow",
                Status.UNVERIFIED: "yellow", Status.SKIPPED: "yellow"}
WIDE = 120  # console columns from which tables show every column under its long header
OPS_WIDE = 140  # the same for `bench --ops`: its eleven columns need about 135
_SITE = re.compile(r"\(([^()\s]+):(\d+)\)")  # "(path/to/file.py:12)" in a meta impl's source


def document(command: str, device: str, results: list[dict], **extra: Any) -> dict:
    import torch

    return {"tool": "aclcap", "command": command, "version": aclcap.__version__,
            "device": device, "torch": torch.__version__, "results": results, **extra}


def write_json(path: str, doc: dict) -> None:
    """`-` is stdout; a path's folder must exist (bad input otherwise)."""
    text = json.dumps(doc, indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    target = Path(path)
    if not target.parent.exists():
        raise UsageError(f"--json {path}: folder {target.parent} does not exist")
    target.write_text(text)


def _status(status: str, label: str | None = None) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{label or status}[/]"


def build_table(report: BuildReport) -> Table:
    table = Table(title=f"aclcap build -> {report.build_dir}")
    for col in ("target", "status", "time (s)", "output / reason"):
        table.add_column(col)
    for t in report.targets:
        detail = t.output or t.reason
        if t.status == Status.FAIL:
            detail = t.reason
        table.add_row(t.name, _status(t.status, t.status.replace("_", " ")), f"{t.seconds:.2f}",
                      detail)
    return table


def _short_paths(text: str) -> str:
    """Paths under the working directory print relative: the table stays narrow."""
    cwd = str(Path.cwd()) + "/"
    return text.replace(cwd, "")


def meta_table(report: MetaReport, width: int) -> RenderableType:
    """From WIDE columns up one row holds an op's schema, meta impl and reasons; below, a
    schema or a reason would wrap over many lines, so a row holds two (the op and its meta
    impl in short; status and sample count) and the reasons follow the table."""
    title = f"aclcap check-meta: namespaces {', '.join(report.namespaces)}"
    if width >= WIDE:
        return _meta_wide(report, title)
    table = _titled(title, show_lines=True)
    table.add_column("op / meta impl", overflow="fold")
    for col in ("kernels", "status"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        samples = f"\n[dim]{r.sample_count} samples[/]" if r.sample_count else ""
        table.add_row(f"[bold]{r.op}[/]\n[dim]{_meta_brief(r.meta_source)}[/]",
                      ", ".join(r.kernels) or "none", _status(r.status) + samples)
    return Group(table, *_notes((r.op, [f.text() for f in r.findings]) for r in report.results))


def _meta_wide(report: MetaReport, title: str) -> Table:
    table = _titled(title, show_lines=True)
    table.add_column("op / schema", ratio=4, overflow="fold")
    table.add_column("kernels", overflow="fold")
    table.add_column("meta impl", ratio=2, overflow="fold")
    table.add_column("status", overflow="fold")
    table.add_column("reasons", ratio=4, overflow="fold")
    for r in report.results:
        signature = r.schema[r.schema.find("("):]  # the op line already names it
        sources = f"\n[dim]samples: {'; '.join(r.sample_sources)}[/]" if r.sample_sources else ""
        table.add_row(f"[bold]{r.op}[/]\n[dim]{signature}[/]", ", ".join(r.kernels) or "none",
                      _short_paths(r.meta_source) + sources, _status(r.status),
                      "\n".join(f.text() for f in r.findings))
    return table


def _meta_brief(source: str) -> str:
    """A meta impl's kind and file:line, without folders or explanation: one short line."""
    kind = re.split(r" \(|: ", source, maxsplit=1)[0]
    site = _SITE.search(source)
    return f"{kind} ({Path(site[1]).name}:{site[2]})" if site else kind


def _titled(title: str, show_lines: bool = False) -> Table:
    """At least as wide as its title where the console allows: rich wraps a title at the
    table's width, and a narrow table would break it over lines."""
    return Table(title=title, show_lines=show_lines,
                 min_width=max(cell_len(line) for line in title.splitlines()))


def _notes(items: Iterable[tuple[str, list[str]]]) -> list[RenderableType]:
    """Reasons under a narrow table, indented under the name of their row: a reasons column
    there would wrap every row over many lines."""
    notes: list[RenderableType] = []
    for label, reasons in items:
        if reasons:
            notes.append(Text(label, style="bold"))
            notes += [Padding(Text(reason), (0, 0, 0, 2), expand=False) for reason in reasons]
    return notes


def console_for(json_path: str | None) -> Console:
    """Tables go to stderr when the JSON document takes stdout."""
    return Console(stderr=json_path == "-")


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def _short(value: float | None, decimals: int, whole_from: float) -> str:
    """`decimals` below `whole_from`, none from there: a column keeps its width at any scale."""
    return _num(value, f".{decimals if value is None or value < whole_from else 0}f")


def _times(value: float | None) -> str:
    return "—" if value is None else _short(value, 2, 100) + "x"


class _Col(NamedTuple):
    """A column: its header in a wide table (over lines of its own: numbers never wrap),
    its header in a narrow one (None: dropped there), and whether it holds text (left,
    folds) or numbers (right)."""

    wide: str
    narrow: str | None
    text: bool = False


def _table(title: str, columns: Sequence[_Col], rows: Iterable[Sequence[str]], wide: bool
           ) -> Table:
    """Text folds rather than ending in "…"; numbers never wrap, so a table too wide for the
    console squeezes its text instead (no_wrap with fold would crop a number unseen)."""
    keep = [i for i, c in enumerate(columns) if wide or c.narrow]
    table = _titled(title)
    for c in (columns[i] for i in keep):
        header = c.narrow if c.narrow and not wide else c.wide
        if c.text:
            table.add_column(header, overflow="fold")
        else:
            table.add_column(header, justify="right", no_wrap=True)
    for cells in rows:
        table.add_row(*(cells[i] for i in keep))
    return table


def capture_table(report: CaptureReport, per_rank: bool, width: int) -> RenderableType:
    """One row per size; with --nproc the worst rank's (its rank shown), or every rank's.
    Below WIDE the mechanism (in the title already) and the reasons columns give way: the
    reasons follow the table."""
    ranks = report.backend.get("ranks")
    title = f"aclcap capture {report.model}: {report.mechanism} on {report.device}, " \
            f"{report.dtype}" + (f", {ranks} ranks" if ranks else "")
    title += " (worst rank per size)" if ranks and not per_rank else ""
    rows = sorted(report.rank_rows if per_rank and report.rank_rows else report.rows,
                  key=lambda r: (r.size, r.rank or 0))
    logits = any(r.token_agreement is not None for r in rows)
    columns = [_Col("rank", "rank")] if ranks else []
    columns += [_Col("size", "size"), _Col("mechanism", None, True),
                _Col("capture\n(ms)", "cap ms"), _Col("memory\n(MiB)", "MiB"),
                _Col("max abs\nerr", "abs err"), _Col("max rel\nerr", "rel err")]
    columns += [_Col("tokens\nagree", "tokens"), _Col("logprob\nerr", "lp err")] if logits else []
    columns += [_Col("status", "status", True), _Col("reasons", None, True)]
    wide = width >= WIDE
    table = _table(title, columns, _capture_cells(rows, bool(ranks), logits, wide), wide)
    return table if wide else Group(table, *_notes(_capture_reasons(rows)))


def _capture_cells(rows: list[CaptureRow], ranks: bool, logits: bool, wide: bool
                   ) -> Iterable[list[str]]:
    previous: CaptureRow | None = None
    for r in rows:
        size = str(r.size)
        if r.padded_to:
            size += f" (pad→{r.padded_to})" if wide else f"→{r.padded_to}"
        reasons = "\n".join(r.reasons)
        if previous is not None and r.reasons and r.reasons == previous.reasons:
            reasons = f"(as size {previous.size})"
        else:
            previous = r
        capture_ms = None if r.capture_us is None else r.capture_us / 1000
        memory = None if r.memory_bytes is None else r.memory_bytes / 2**20
        cells = [str(r.rank)] if ranks else []
        cells += [size, r.mechanism, _short(capture_ms, 1, 1000), _short(memory, 2, 100),
                  _num(r.max_abs_err, ".2g"), _num(r.max_rel_err, ".2g")]
        if logits:
            agree = None if r.token_agreement is None else 100 * r.token_agreement
            cells += [_num(agree, ".0f") + ("%" if agree is not None else ""),
                      _num(r.max_logprob_err, ".2g")]
        yield [*cells, _status(r.status), reasons]


def _capture_reasons(rows: list[CaptureRow]) -> list[tuple[str, list[str]]]:
    """Rows that failed alike share one note ("sizes 1, 2, 4"), as the wide table's
    "(as size N)" does."""
    sizes: dict[tuple[str, ...], list[str]] = {}
    for r in rows:
        if r.reasons:
            rank = f" (rank {r.rank})" if r.rank is not None else ""
            sizes.setdefault(tuple(r.reasons), []).append(f"{r.size}{rank}")
    return [(("sizes " if len(names) > 1 else "size ") + ", ".join(names), list(reasons))
            for reasons, names in sizes.items()]


def plan_lines(doc: dict) -> list[str]:
    over = len(doc["vllm_default_sizes"]) > doc["budget"]
    return [
        f"capture sizes for a budget of {doc['budget']} graphs ({doc['distribution']}): "
        f"{','.join(map(str, doc['sizes']))}",
        f"expected padding waste: {doc['expected_waste']:.2f} tokens per step",
        f"vLLM's default list ({len(doc['vllm_default_sizes'])} sizes"
        + (", over the budget" if over else "") + f"): {doc['vllm_default_waste']:.2f} tokens "
        "per step",
        f"use: --shapes {','.join(map(str, doc['sizes']))}",
    ]


def totals_line(report: CaptureReport) -> str | None:
    t = report.totals()
    if not t:
        return None
    ratio = t["memory_over_largest"]
    return (f"capture: {t['capture_us'] / 1000:.1f} ms over all sizes (order "
            f"{t['capture_order']}), memory {t['memory_bytes'] / 2**20:.2f} MiB in all, "
            f"{ratio:.2f}x the largest graph" if ratio else "")


def mechanism_line(report: CaptureReport) -> str:
    """Which mechanism ran, said in words (the brief: output must always say so)."""
    facts = report.backend
    if report.mechanism == "aoti":
        if "artifact" not in facts:
            return "mechanism: aoti (AOTInductor, one artifact for all sizes): not built"
        cache = "cache hit" if facts["cache_hit"] else f"compiled in {facts['compile_s']:.1f} s"
        if facts.get("cache_note"):
            cache += f" ({facts['cache_note']})"
        if facts.get("inductor_configs"):
            cache += ", tuned (--max-autotune: " + ", ".join(facts["inductor_configs"]) + ")"
        artifacts = facts.get("artifacts", [])
        if len(artifacts) > 1:
            ranges = ", ".join(f"sizes {a['range']} ({','.join(map(str, a['sizes']))})"
                               for a in artifacts)
            guard = f" ({facts['guard']})" if facts.get("guard") else ""
            return (f"mechanism: aoti (AOTInductor; no device graphs exist on a CPU): "
                    f"{len(artifacts)} artifacts: {ranges}{guard}, "
                    f"{facts['artifact_bytes'] / 2**20:.1f} MiB in all, {cache}")
        return (f"mechanism: aoti (AOTInductor, one artifact for all sizes; no device graphs "
                f"exist on a CPU): {_short_paths(facts['artifact'])}, "
                f"{facts['artifact_bytes'] / 2**20:.1f} MiB, {cache}")
    api = facts.get("graph_api", "device graph")
    return (f"mechanism: {report.mechanism} via {api}, step compiled with "
            f"torch.compile(backend={facts.get('compile_backend')!r}), one shared pool")


def trace_lines(report: CaptureReport) -> list[str]:
    trace = report.trace
    lines = [f"trace: {trace.graph_count} graph(s), {len(trace.graph_breaks)} graph break(s), "
             f"ops per graph {trace.ops_per_graph}"]
    if failure := trace.error_line():
        lines.append(f"  {failure}")
    for br in trace.graph_breaks:
        lines.append(f"  break at {_short_paths(br.file)}:{br.line}: {br.reason}")
    lines.append("custom ops in graph: " + (", ".join(trace.custom_ops_in_graph) or "none"))
    for op in trace.custom_ops_outside_graph:
        lines.append(f"custom op outside any graph: {op['op']}: {op['reason']}")
    for op in trace.custom_ops_wrong_meta:
        lines.append(f"custom op with a wrong meta impl: {op['op']}: {op['reason']}")
    if trace.recompiles:
        backend = report.backend.get("compile_backend")
        # The sizes that compiled, as the JSON's trace.recompiles has them (set whether or
        # not the capture that followed succeeded).
        lines.append(f"compiles at sizes {[c.size for c in trace.recompiles]}: "
                     f"{len(trace.recompiles)} (torch.compile, backend {backend!r})")
        lines += [f"  {c.text()}" for c in trace.recompiles]
        if report.fail_on_recompile and report.recompiled():
            lines.append(f"--fail-on-recompile: {len(report.recompiled())} recompile(s) after "
                         "the first size")
    if report.bisect is not None:
        b = report.bisect
        if b.get("node"):
            lines.append(f"bisect: first diverging node `{b['node']}` ({b['op']}, shape "
                         f"{b['shape']}) at {b['source']}: max abs err {b['max_abs_err']:.3g}"
                         + (f", error {b['error']}" if b.get("error") else ""))
        else:
            lines.append(f"bisect: {b['error']}")
    return lines


_BENCH = (_Col("size", "size"), _Col("mode", "mode", True), _Col("mechanism", None, True),
          _Col("step median\n(µs)", "med µs"), _Col("step p90\n(µs)", "p90 µs"),
          _Col("host\n(µs)", "host µs"), _Col("device\n(µs)", "dev µs"),
          _Col("launches/step", "launch"), _Col("speedup vs\neager", "vs eager"))


def bench_table(report: BenchReport, width: int) -> Table:
    """Below WIDE the title names the graph mechanism instead of a column: the mode implies
    each row's."""
    ranks = f", {report.ranks} ranks, each round the slowest rank's" if report.ranks else ""
    title = f"aclcap bench {report.model}: {report.device}, {report.dtype}, median of " \
            f"{report.rounds} interleaved rounds{ranks}"
    tuned = ", tuned by --max-autotune" if report.max_autotune else ""
    title += f"\n(graph mode: {report.mechanism}{tuned})" if width < WIDE or tuned else ""
    rows = ([str(r.size), r.mode, r.mechanism, _short(r.step_median_us, 1, 1000),
             _short(r.step_p90_us, 1, 1000), _short(r.host_us, 1, 1000),
             _short(r.device_us, 1, 1000), _num(r.launches, "d"), _times(r.speedup_vs_eager)]
            for r in report.rows)
    return _table(title, _BENCH, rows, width >= WIDE)


def bench_lines(report: BenchReport) -> list[str]:
    lines = []
    what = "step time" if report.device == "cpu" else "host time per step"
    for size, share in report.host_overhead_removed().items():
        lines.append(f"size {size}: graph replay ({report.mechanism}) removed {share:.0%} of "
                     f"eager's {what}")
    for size, ratio in report.padding_cost().items():
        lines.append(f"size {size}: padded replay takes {ratio:.2f}x the exact-size graph's step "
                     "time")
    if report.device == "cpu":
        lines.append("on cpu all time is host time: no device time (—), and host time = step time")
    for r in report.rows:
        if r.per_rank:
            each = ", ".join(f"rank {p['rank']} {p['step_median_us']:.1f}" for p in r.per_rank)
            lines.append(f"size {r.size} {r.mode}: per-rank median step (µs): {each}")
    if report.interrupted:
        lines.append("interrupted: the table holds the rounds finished before Ctrl-C")
    return lines


def lint_table(findings: list) -> Table:
    table = Table(title="aclcap check-meta --lint: meta impls that use concrete sizes")
    for col in ("file:line", "rule", "code", "fix"):
        table.add_column(col, overflow="fold")
    for f in findings:
        table.add_row(f"{_short_paths(f.file)}:{f.line}", f.rule, f.code, f.hint)
    return table


_OPS = (_Col("op", "op", True), _Col("dtype", "dtype", True), _Col("shape", "shape", True),
        _Col("kernel\n(µs)", "kern µs"), _Col("reference\n(µs)", None),
        _Col("speedup", "speedup"), _Col("F.rms_norm\n(µs)", None), _Col("GB/s", None),
        _Col("floor\n(µs)", None), _Col("kernel/floor", "/ floor"), _Col("alloc\n(µs)", None))


def ops_table(rows: list[dict], title: str | None = None, width: int = OPS_WIDE) -> Table:
    """Below OPS_WIDE the kernel's time and its two ratios: the reference's time, the floor's
    and GB/s follow from them; F.rms_norm and alloc are only shown at width."""
    cells = ([r["op"], _dtype(r["dtype"]), "x".join(map(str, r["shape"])),
              _short(r["kernel_us"], 1, 1000), _short(r["reference_us"], 1, 1000),
              _times(r["speedup"]), _short(r["f_rms_norm_us"], 1, 1000),
              f"{r['achieved_gbps']:.1f}", _short(r["floor_us"], 1, 1000),
              f"{r['kernel_over_floor']:.2f}", _short(r["alloc_us"], 1, 1000)] for r in rows)
    return _table(title or "aclcap bench --ops: kernels vs eager reference and their floor "
                  "(the op's own access pattern over its own tensors)", _OPS, cells,
                  width >= OPS_WIDE)


def _dtype(name: str) -> str:
    """float32 -> fp32, bfloat16 -> bf16: the short names kernels are known by."""
    return name.replace("bfloat", "bf").replace("float", "fp")


def floor_lines(report: BenchReport) -> list[str]:
    """Per size, the bytes a step must move and each mode's time over that floor."""
    lines = []
    for size, b in report.step_bytes.items():
        over = ", ".join(f"{r.mode} {r.over_floor:.1f}x" for r in report.rows
                         if r.size == size and r.over_floor is not None)
        gbps = report.read_gbps[size]
        lines.append(f"size {size}: a step moves {b.total / 2**20:.1f} MiB (weights "
                     f"{b.params_bytes / 2**20:.1f}, inputs {b.inputs_bytes / 2**20:.1f}, "
                     f"written {b.written_bytes / 2**20:.2f}): floor {b.total / gbps / 1e3:.0f} "
                     f"µs at {gbps:.1f} GB/s (a read pass over as many bytes); {over}")
    return lines


def profile_table(report: BenchReport, size: int) -> Table:
    """One size's profiles side by side: each op's share of the step per mode, so what the
    graph removed (a share gone) and what remains read across a row. A mode's step time
    goes under its name: the columns stay as narrow as their shares."""
    profiles = [p for p in report.profiles if p.size == size]
    table = _titled(f"bench --profile, size {size}: share of the step by self time")
    table.add_column("op", overflow="fold")
    for p in profiles:
        table.add_column(f"{p.mode}\n{p.step_us:.0f} µs", justify="right", no_wrap=True)
    names: list[str] = []
    for p in profiles:
        names += [t["name"] for t in p.top if t["name"] not in names]
    for name in names:
        cells = []
        for p in profiles:
            share = next((t["share"] for t in p.top if t["name"] == name), None)
            cells.append("—" if share is None else f"{100 * share:.0f}%")
        table.add_row(name, *cells)
    return table
