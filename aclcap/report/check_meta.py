"""`aclcap check-meta`: one row per op overload. Reads MetaReport and MetaResult through
their public attributes only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from aclcap.report.layout import WIDE, document, notes, short_paths, status_cell, titled
from aclcap.status import FAILING, Severity, Status

if TYPE_CHECKING:
    from aclcap.meta.runner import MetaReport, MetaResult
    from aclcap.meta.synthesize.pipeline import SynthesisRun

_SITE = re.compile(r"\(([^()\s]+):(\d+)\)")  # "(path/to/file.py:12)" in a meta impl's source


# Why a row fails the run, in the words of the summary line, failing statuses in this order.
_FAILING_WORDS = {Status.MISSING: "missing meta", Status.FAIL: "failing",
                  Status.CRASHED: "crashed", Status.TIMEOUT: "timed out"}
# The room the other columns need beside the op's: kernels, status (not_exercised) and the
# borders (narrow); kernels, meta impl, status, reasons and the borders (wide).
_BESIDE_OP = {False: 31, True: 75}


def problem(row: MetaResult) -> bool:
    """A row a reader must act on: it fails the run, or warns (fails under --strict)."""
    return row.status in FAILING or any(f.severity is Severity.WARNING for f in row.findings)


def shown_rows(result: MetaReport, every: bool) -> list[MetaResult]:
    """Problems first, failing ones before warnings (as linters list what to fix); without
    `every` (--all) only those: a library of 258 ops is mostly passing and not_exercised
    rows, and the few that need work would sit among them."""
    rank = sorted(result.results, key=lambda r: (r.status not in FAILING, not problem(r)))
    return rank if every else [r for r in rank if problem(r)]


def render(result: MetaReport, width: int, every: bool = False) -> RenderableType:
    """From WIDE columns up one row holds an op's schema, meta impl and reasons; below, a
    schema or a reason would wrap over many lines, so a row holds two (the op and its meta
    impl in short; status and sample count) and the reasons follow the table. The op's
    column is as wide as its longest name where the console allows: a name never breaks.
    Rows not shown (see shown_rows) are counted in a line under the table."""
    rows = shown_rows(result, every)
    hidden = hidden_lines(result, rows)
    below = [Text(line) if i == 0 else Padding(Text(line), (0, 0, 0, 2), expand=False)
             for i, line in enumerate(hidden)]
    title = f"aclcap check-meta: namespaces {', '.join(result.namespaces)}"
    if not rows:  # nothing to show: the title still says what was checked
        return Group(Text(title, style="bold"), *below)
    wide = width >= WIDE
    op_width = _op_width(rows, width, wide)
    table = _wide(rows, title, op_width) if wide else _narrow(rows, title, op_width)
    found = [] if wide else notes((r.op, [f.text() for f in r.findings]) for r in rows)
    return Group(table, *found, *below)


def _op_width(rows: list[MetaResult], width: int, wide: bool) -> int:
    """The op column: as wide as its longest name (and meta impl in short, narrow), or in
    the wide table a third of the console for the schema under it; at most what leaves the
    other columns their room, where a name too long for any column folds."""
    if wide:
        wanted = max(max(cell_len(r.op) for r in rows), (width - 16) // 3)
    else:
        wanted = max(max(cell_len(r.op), cell_len(_brief(r.meta_source))) for r in rows)
    return min(wanted, max(width - _BESIDE_OP[wide], 20))


def hidden_lines(result: MetaReport, shown: list[MetaResult]) -> list[str]:
    """`not shown: 100 pass, 142 not_exercised (--all prints every row)`, then a status's
    reason where every hidden row of it gives the same one (none when nothing is hidden)."""
    by_status: dict[str, list[MetaResult]] = {}
    for r in result.results:
        if r not in shown:
            by_status.setdefault(str(r.status), []).append(r)
    if not by_status:
        return []
    lines = ["not shown: " + ", ".join(f"{len(rs)} {status}" for status, rs in by_status.items())
             + " (--all prints every row)"]
    for status, rs in by_status.items():
        reasons = {tuple(f.text() for f in r.findings) for r in rs}
        if len(reasons) == 1 and (only := next(iter(reasons))):
            lines.append(f"{status}: {'; '.join(only)}")
    return lines


def exit_reasons(result: MetaReport, synthesized: SynthesisRun | None = None) -> list[str]:
    """What makes the run exit 1, as the last line says it (none: exit 0): the summary
    counts missing metas apart from failing ones, and a synthesis that did not verify
    fails a run whose checks all pass."""
    reasons = [f"{n} {words}" for status, words in _FAILING_WORDS.items()
               if (n := result.count(status))]
    if result.strict and (n := result.count(Status.NO_KERNEL)):
        reasons.append(f"{n} with no kernel for {result.device} (--strict)")
    if synthesized is not None and not synthesized.ok:
        bad = [s.op for s in synthesized.done if not s.ok and not s.no_samples]
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        if bad:
            reasons.append(f"{len(bad)} of {len(synthesized.done)} op(s) to synthesize not "
                           f"verified ({', '.join(bad[:3])}{more}: see synthesis above)")
        if n := sum(s.no_samples for s in synthesized.done):
            reasons.append(f"{n} op(s) to synthesize without samples")
        if synthesized.cpp_build_error:
            reasons.append("the emitted C++ does not build (see synthesis above)")
        if faulty := [s.op for s in synthesized.done if s.kernel_findings]:
            reasons.append(f"{len(faulty)} op(s) whose kernel gives two eager runs on the same "
                           f"inputs differently ({', '.join(faulty[:3])}"
                           f"{' and more' if len(faulty) > 3 else ''}: KERNEL FINDING above)")
    return reasons


def to_document(result: MetaReport, device: str, synthesized: SynthesisRun | None = None
                ) -> dict:
    """The check-meta document; with synthesis, each synthesized op's row carries its
    `synthesis` field and the document the run's."""
    rows = result.to_dicts()
    extra: dict[str, dict] = {}
    if synthesized is not None:
        for row in rows:
            if row["op"] in synthesized.by_op:
                row["synthesis"] = synthesized.by_op[row["op"]].to_dict()
        extra["synthesis"] = synthesized.summary()
    return document("check-meta", device, rows, namespaces=result.namespaces,
                    summary=result.counts(), workers=result.workers, **extra)


def durations_line(result: MetaReport, count: int = 5, width: int | None = None) -> str:
    """The slowest ops, as pytest --durations names its slowest tests ('' if none ran): as
    many of the `count` slowest as fit in `width` (one at least; None: no limit)."""
    slowest = result.slowest(count)
    if not slowest:
        return ""
    total = sum(r.check_s for r in result.fresh())
    workers = f" in {result.workers} workers" if result.workers > 1 else ""
    text = f"slowest ops (of {total:.1f} s checking{workers}): " \
        f"{slowest[0].op} {slowest[0].check_s:.1f} s"
    for r in slowest[1:]:
        longer = f"{text}, {r.op} {r.check_s:.1f} s"
        if width is not None and cell_len(longer) > width:
            break
        text = longer
    return text


def cache_line(result: MetaReport) -> str:
    """How many rows the result cache gave ('' if none): they were not checked again."""
    cached = sum(r.cached for r in result.results)
    return f"{cached} row(s) from the result cache (--no-cache checks every op)" if cached \
        else ""


def _narrow(rows: list[MetaResult], title: str, op_width: int) -> Table:
    table = titled(title, show_lines=True)
    table.add_column("op / meta impl", width=op_width, overflow="fold")
    table.add_column("kernels", overflow="fold")
    table.add_column("status", no_wrap=True)
    for r in rows:
        samples = f"\n[dim]{r.sample_count} samples[/]" if r.sample_count else ""
        table.add_row(f"[bold]{r.op}[/]\n[dim]{_brief(r.meta_source)}[/]",
                      ", ".join(r.kernels) or "none", status_cell(r.status) + samples)
    return table


def _wide(rows: list[MetaResult], title: str, op_width: int) -> Table:
    table = titled(title, show_lines=True)
    table.add_column("op / schema", width=op_width, overflow="fold")
    table.add_column("kernels", overflow="fold")
    table.add_column("meta impl", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("reasons", overflow="fold")
    for r in rows:
        signature = r.schema[r.schema.find("("):]  # the op line already names it
        sources = f"\n[dim]samples: {'; '.join(r.sample_sources)}[/]" if r.sample_sources else ""
        table.add_row(f"[bold]{r.op}[/]\n[dim]{signature}[/]", ", ".join(r.kernels) or "none",
                      short_paths(r.meta_source) + sources, status_cell(r.status),
                      "\n".join(f.text() for f in r.findings))
    return table


def _brief(source: str) -> str:
    """A meta impl's kind and file:line, without folders or explanation: one short line."""
    kind = re.split(r" \(|: ", source, maxsplit=1)[0]
    site = _SITE.search(source)
    return f"{kind} ({Path(site[1]).name}:{site[2]})" if site else kind


def synthesis_lines(run: SynthesisRun) -> list[str]:
    """The report: per op its verdict, the rule in words, defects, notes, diffs."""
    from aclcap.meta.synthesize.describe import describe_rule  # torch: only with synthesis

    tagged = [f"  {len(run.left_to_torch)} op(s) not synthesized, torch generates their fake "
              "from their tag (torch.Tag.out, torch.Tag.inplace; their rows above check it): "
              + ", ".join(run.left_to_torch)] if run.left_to_torch else []
    if not run.done:
        return ["synthesis: no op's meta is missing, failing or left to torch's trivial "
                "fake: nothing written (--synthesize-all re-derives every op)", *tagged]
    made = sum(s.rule is not None for s in run.done)
    verified = sum(s.ok for s in run.done)
    out = [f"synthesis: {len(run.done)} op(s), {made} synthesized, {verified} verified, "
           f"in {run.seconds:.1f} s -> {', '.join(map(str, run.files))}"]
    for s in run.done:
        if s.no_samples:
            continue
        out.append(f"  {s.op}: {s.verdict()}")
        out += [f"    KERNEL FINDING: {k}" for k in s.kernel_findings]
        out += [f"    kernel warning: {k}" for k in s.kernel_warnings]
        if s.rule is None:
            continue
        out.append(f"    from {s.rule.evidence} ({s.observed} of {s.tried} tried calls "
                   f"accepted; samples: {', '.join(s.sample_sources) or 'none'})")
        out += [f"    {line}" for line in describe_rule(s.rule)]
        out += [f"    schema defect: {d.message}" for d in s.rule.defects]
        if corrected := s.rule.corrected_schema():
            out.append(f"    corrected schema: {corrected}")
        out += [f"    note: {n}" for n in s.rule.notes]
        out += [f"    existing meta differs from the kernel at {d}" for d in s.meta_diffs]
        if s.meta_compared and not s.meta_diffs:
            out.append(f"    existing meta agrees with the kernel on all {s.meta_compared} "
                       "calls")
    if bare := [s.op for s in run.done if s.no_samples]:
        out.append(f"  {len(bare)} op(s) not synthesized, no samples (declare them with "
                   "@aclcap.samples or pass --samples-from MODEL.py): " + ", ".join(bare))
    out += tagged
    if run.library is not None:
        out.append(f"  C++ Meta kernels built into {run.library}")
    if run.cpp_build_error:
        out.append(f"  C++ Meta kernels NOT built (no op's C++ kernel is verified; the Python "
                   f"verdicts above stand): {run.cpp_build_error}")
    return out
