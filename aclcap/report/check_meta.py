"""`aclcap check-meta`: one row per op overload. Reads MetaReport and MetaResult through
their public attributes only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table

from aclcap.report.layout import WIDE, document, notes, short_paths, status_cell, titled

if TYPE_CHECKING:
    from aclcap.meta.runner import MetaReport
    from aclcap.meta.synthesize.pipeline import SynthesisRun

_SITE = re.compile(r"\(([^()\s]+):(\d+)\)")  # "(path/to/file.py:12)" in a meta impl's source


def render(result: MetaReport, width: int) -> RenderableType:
    """From WIDE columns up one row holds an op's schema, meta impl and reasons; below, a
    schema or a reason would wrap over many lines, so a row holds two (the op and its meta
    impl in short; status and sample count) and the reasons follow the table."""
    title = f"aclcap check-meta: namespaces {', '.join(result.namespaces)}"
    if width >= WIDE:
        return _wide(result, title)
    table = titled(title, show_lines=True)
    table.add_column("op / meta impl", overflow="fold")
    for col in ("kernels", "status"):
        table.add_column(col, overflow="fold")
    for r in result.results:
        samples = f"\n[dim]{r.sample_count} samples[/]" if r.sample_count else ""
        table.add_row(f"[bold]{r.op}[/]\n[dim]{_brief(r.meta_source)}[/]",
                      ", ".join(r.kernels) or "none", status_cell(r.status) + samples)
    return Group(table, *notes((r.op, [f.text() for f in r.findings]) for r in result.results))


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


def durations_line(result: MetaReport, count: int = 5) -> str:
    """The slowest ops, as pytest --durations names its slowest tests ('' if none ran)."""
    slowest = result.slowest(count)
    total = sum(r.check_s for r in result.results)
    if not slowest:
        return ""
    workers = f" in {result.workers} workers" if result.workers > 1 else ""
    return (f"slowest ops (of {total:.1f} s checking{workers}): "
            + ", ".join(f"{r.op} {r.check_s:.1f} s" for r in slowest))


def _wide(result: MetaReport, title: str) -> Table:
    table = titled(title, show_lines=True)
    table.add_column("op / schema", ratio=4, overflow="fold")
    table.add_column("kernels", overflow="fold")
    table.add_column("meta impl", ratio=2, overflow="fold")
    table.add_column("status", overflow="fold")
    table.add_column("reasons", ratio=4, overflow="fold")
    for r in result.results:
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

    if not run.done:
        return ["synthesis: no op's meta is missing, failing or left to torch's trivial "
                "fake: nothing written (--synthesize-all re-derives every op)"]
    made = sum(s.rule is not None for s in run.done)
    verified = sum(s.ok for s in run.done)
    out = [f"synthesis: {len(run.done)} op(s), {made} synthesized, {verified} verified, "
           f"in {run.seconds:.1f} s -> {', '.join(map(str, run.files))}"]
    for s in run.done:
        out.append(f"  {s.op}: {s.verdict()}")
        if s.rule is None:
            continue
        out.append(f"    from {s.rule.evidence} ({s.observed} of {s.tried} tried calls "
                   f"accepted; samples: {', '.join(s.sample_sources) or 'none'})")
        out += [f"    {line}" for line in describe_rule(s.rule)]
        out += [f"    schema defect: {d.message}; corrected: {d.corrected_schema}"
                for d in s.rule.defects]
        out += [f"    note: {n}" for n in s.rule.notes]
        out += [f"    existing meta differs from the kernel at {d}" for d in s.meta_diffs]
        if s.meta_compared and not s.meta_diffs:
            out.append(f"    existing meta agrees with the kernel on all {s.meta_compared} "
                       "calls")
    return out
