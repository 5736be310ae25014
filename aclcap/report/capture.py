"""`aclcap capture`: one row per size (per rank with --nproc), then the mechanism, the
totals, the trace, the cross-rank checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.markup import escape

from aclcap.report.layout import (
    WIDE,
    Col,
    document,
    line,
    notes,
    num,
    plain,
    short,
    short_paths,
    status_cell,
    table,
)

if TYPE_CHECKING:
    from aclcap.capture.run import CaptureReport, CaptureRow


def render(result: CaptureReport, width: int, per_rank: bool = False) -> list[RenderableType]:
    """Everything `aclcap capture` prints, in order, one renderable a print."""
    parts: list[RenderableType] = [capture_table(result, per_rank, width)]
    parts += [line(f"[yellow]warning:[/] {escape(text)}") for text in warning_lines(result)]
    parts += [plain(text) for text in host_value_lines(result)]
    if result.draw_state:
        parts.append(plain(draw_state_line(result)))
    parts.append(line(mechanism_line(result)))
    parts += [plain(text) for text in piecewise_lines(result)]
    if text := totals_line(result):
        parts.append(line(text))
    if text := phases_line(result):
        parts.append(plain(text))
    parts += [plain(text) for text in trace_lines(result)]
    parts += [line(f"[red]across ranks:[/] {escape(problem)}") for problem in result.cross_rank]
    if result.fullgraph and result.trace.graph_breaks:
        parts.append(line("[red]the model does not trace as one graph: vLLM (fullgraph=True) "
                          "would refuse it[/]"))
    return parts


def draw_state_line(result: CaptureReport) -> str:
    """Where make_inputs' state lives, which ops read it, and what a device graph does."""
    readers = ", ".join(f"{op} (reads {what})" for op, what in result.state_readers.items())
    who = f"ops that read it: {readers}" if readers else \
        "no op's Python kernel in the graph reads it (a C++ kernel's reads cannot be seen)"
    return (f"state set by make_inputs outside its inputs: {', '.join(result.draw_state)}; "
            f"{who}. On cpu an op reads it live at every replay; a device graph freezes what "
            "an op read of it at capture unless it is kept in persistent buffers refilled "
            "before each replay, as vLLM's runner keeps its metadata")


def to_document(result: CaptureReport) -> dict:
    """Every row; with --nproc every rank's, each with its `rank`."""
    if result.rank_rows:
        rows = [r.to_dict() for r in result.rank_rows]
    else:
        rows = [{k: v for k, v in r.to_dict().items() if k != "rank"} for r in result.rows]
    return document("capture", result.device, rows, model=result.model_path, dtype=result.dtype,
                    mechanism=result.mechanism, trace=result.trace.to_dict(),
                    backend=result.backend.to_dict(), bisect=result.bisect,
                    totals=result.totals(), phases_s=result.phases_s,
                    frozen_values=[f.to_dict() for f in result.frozen_values()],
                    host_reads=result.host_reads, host_constants=result.host_constants,
                    draw_state=result.draw_state, state_readers=result.state_readers,
                    trace_cache=result.trace_cache)


def capture_table(result: CaptureReport, per_rank: bool, width: int) -> RenderableType:
    """One row per size; with --nproc the worst rank's (its rank shown), or every rank's.
    Below WIDE the mechanism (in the title already) and the reasons columns give way: the
    reasons follow the table."""
    ranks = result.backend.ranks
    title = f"aclcap capture {result.model}: {result.mechanism} on {result.device}, " \
            f"{result.dtype}" + (f", {ranks} ranks" if ranks else "")
    title += " (worst rank per size)" if ranks and not per_rank else ""
    rows = sorted(result.rank_rows if per_rank and result.rank_rows else result.rows,
                  key=lambda r: (r.size, r.rank or 0))
    logits = any(r.token_agreement is not None for r in rows)
    columns = [Col("rank", "rank")] if ranks else []
    columns += [Col("size", "size"), Col("mechanism", None, True),
                Col("capture\n(ms)", "cap ms"), Col("memory\n(MiB)", "MiB"),
                Col("max abs\nerr", "abs err"), Col("max rel\nerr", "rel err")]
    columns += [Col("tokens\nagree", "tokens"), Col("logprob\nerr", "lp err")] if logits else []
    columns += [Col("status", "status", True), Col("reasons", None, True)]
    wide = width >= WIDE
    built = table(title, columns, _cells(rows, bool(ranks), logits, wide), wide)
    return built if wide else Group(built, *notes(_reasons(rows)))


def _cells(rows: list[CaptureRow], ranks: bool, logits: bool, wide: bool
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
        cells += [size, r.mechanism, short(capture_ms, 1, 1000), short(memory, 2, 100),
                  num(r.max_abs_err, ".2g"), num(r.max_rel_err, ".2g")]
        if logits:
            agree = None if r.token_agreement is None else 100 * r.token_agreement
            cells += [num(agree, ".0f") + ("%" if agree is not None else ""),
                      num(r.max_logprob_err, ".2g")]
        yield [*cells, status_cell(r.status), reasons]


def _reasons(rows: list[CaptureRow]) -> list[tuple[str, list[str]]]:
    """Rows that failed alike share one note ("sizes 1, 2, 4"), as the wide table's
    "(as size N)" does."""
    sizes: dict[tuple[str, ...], list[str]] = {}
    for r in rows:
        if r.reasons:
            rank = f" (rank {r.rank})" if r.rank is not None else ""
            sizes.setdefault(tuple(r.reasons), []).append(f"{r.size}{rank}")
    return [(("sizes " if len(names) > 1 else "size ") + ", ".join(names), list(reasons))
            for reasons, names in sizes.items()]


def warning_lines(result: CaptureReport) -> list[str]:
    """Each warning once, with the sizes (and ranks) whose rows carry it."""
    sizes: dict[str, list[str]] = {}
    for r in sorted(result.rank_rows or result.rows, key=lambda r: (r.size, r.rank or 0)):
        for text in r.warnings:
            rank = f" (rank {r.rank})" if r.rank is not None else ""
            sizes.setdefault(text, []).append(f"{r.size}{rank}")
    return [f"{'sizes' if len(names) > 1 else 'size'} {', '.join(names)}: {text}"
            for text, names in sizes.items()]


def host_value_lines(result: CaptureReport) -> list[str]:
    """Each host-fed op argument once, with the sizes it was found at: frozen into the
    graph (stale where this step's value differs and the result with it), or live (its op
    runs eagerly between graph pieces), or frozen but the same in every draw."""
    from aclcap.host_values import show  # imports torch: only once a capture has run

    groups: dict[tuple, list] = {}
    for f in result.frozen_values():
        groups.setdefault((f.op, f.arg, f.file, f.line, f.frozen), []).append(f)
    if not groups and not result.host_reads and not result.host_constants:
        return []
    lines = ["host values (what a graph holds as captured, and what stays live):"]
    for entries in groups.values():
        shown = max(entries, key=lambda f: (f.changes_result, f.captured != f.this_step))
        sizes = ", ".join(str(f.size) for f in entries)
        if not shown.frozen:
            verdict = "live: its op runs eagerly between graph pieces, on this step's values"
        elif shown.changes_result:
            verdict = "frozen, and stale: the replay differs from eager"
        elif shown.captured != shown.this_step:
            verdict = "frozen; this step's value differs but the result did not change"
        else:
            verdict = "frozen; the same in every draw: safe only while callers keep it constant"
        lines.append(f"  {shown.text()} (size {shown.size}; found at sizes {sizes}): {verdict}")
    for name, value in result.host_constants.items():
        lines.append(f"  input {name} = {show(value)} is the same in every draw: frozen into "
                     "the graph, safe only while callers keep it constant")
    reads: Counter[str] = Counter()  # one line a read, however many layers make it
    for read in result.host_reads:
        made = read.get("made_at") or read
        where = f" at {Path(made['file']).name}:{made['line']} (`{made['code']}`)" \
            if made["file"] else ""
        if read["file"] and (read["file"], read["line"]) != (made["file"], made["line"]):
            where += f", through {Path(read['file']).name}:{read['line']}"
        reads[f"  reads tensor data on the host ({read['what']}){where}"] += 1
    lines += [f"{text}{f' ({n} times a step)' if n > 1 else ''}: the traced step breaks "
              "there; the value cannot live in a graph" for text, n in reads.items()]
    return lines


def totals_line(result: CaptureReport) -> str | None:
    t = result.totals()
    if not t:
        return None
    ratio = t["memory_over_largest"]
    return (f"capture: {t['capture_us'] / 1000:.1f} ms over all sizes (order "
            f"{t['capture_order']}), memory {t['memory_bytes'] / 2**20:.2f} MiB in all, "
            f"{ratio:.2f}x the largest graph" if ratio else "")


def phases_line(result: CaptureReport) -> str:
    """`phases: prepare 3.1 s, trace 1.2 s, capture 4.0 s, replay 0.8 s` ('' without)."""
    if not result.phases_s:
        return ""
    return "phases: " + ", ".join(f"{name} {s:.1f} s" for name, s in result.phases_s.items())


def mechanism_line(result: CaptureReport) -> str:
    """Which mechanism ran, said in words (the brief: output must always say so)."""
    facts = result.backend
    if result.mechanism.endswith("-piecewise"):
        built = "not built" if facts.artifact_bytes is None else \
            f"{(facts.artifact_bytes or 0) / 2**20:.1f} MiB of artifacts, " + \
            ("cache hit" if facts.cache_hit else "compiled")
        by_inductor = [a for a in (getattr(facts, "piecewise", None) or {}).get("artifacts", [])
                       if a.get("compiler") == "inductor"]
        each = {"aoti-piecewise": "an AOTInductor artifact",
                "inductor-piecewise": "compiled by Inductor (torch.export cannot take it)",
                }.get(result.mechanism, "an AOTInductor artifact, or compiled by Inductor "
                                        "where torch.export cannot take it")
        why = "".join(f"; piece {a['piece']} by Inductor: {a['why']}" for a in by_inductor[:2])
        return (f"mechanism: {result.mechanism} (the step split at its splitting ops; each "
                f"graph piece {each}, with the size dim dynamic, replayed per size over "
                f"static buffers; the splitting ops run eagerly between): {built}{why}")
    if result.mechanism == "aoti":
        if facts.artifact is None:
            return "mechanism: aoti (AOTInductor, one artifact for all sizes): not built"
        cache = "cache hit" if facts.cache_hit else f"compiled in {facts.compile_s:.1f} s"
        if facts.cache_note:
            cache += f" ({facts.cache_note})"
        if facts.inductor_configs:
            cache += ", tuned (--max-autotune: " + ", ".join(facts.inductor_configs) + ")"
        artifacts = facts.artifacts or []
        mib = (facts.artifact_bytes or 0) / 2**20
        if len(artifacts) > 1:
            ranges = ", ".join(f"sizes {a['range']} ({','.join(map(str, a['sizes']))})"
                               for a in artifacts)
            guard = f" ({facts.guard})" if facts.guard else ""
            static = next((f"; {a['why']}" for a in artifacts if a.get("why")), "")
            return (f"mechanism: aoti (AOTInductor; no device graphs exist on a CPU): "
                    f"{len(artifacts)} artifacts: {ranges}{guard}, {mib:.1f} MiB in all, "
                    f"{cache}{static}")
        return (f"mechanism: aoti (AOTInductor, one artifact for all sizes; no device graphs "
                f"exist on a CPU): {short_paths(facts.artifact)}, {mib:.1f} MiB, {cache}")
    if result.mechanism == "inductor":
        why = f"torch.export could not take the step; {facts.export_failed}" \
            if facts.export_failed else f"torch.export took the step, but {facts.aoti_refused}" \
            if facts.aoti_refused else "chosen by --cpu-mechanism inductor"
        return ("mechanism: inductor (Dynamo's graph compiled by Inductor, as vLLM's graph "
                "mode compiles it, one compile for all sizes; no device graphs exist on a "
                f"CPU), {facts.compiles} compile(s) in {facts.compile_s or 0:.1f} s: {why}")
    api = facts.graph_api or "device graph"
    return (f"mechanism: {result.mechanism} via {api}, step compiled with "
            f"torch.compile(backend={facts.compile_backend!r}), one shared pool")


def piecewise_lines(result: CaptureReport) -> list[str]:
    """The ops the step was split on with their lines, the pieces, the graphs per size and
    in all (what a stream budget counts), and each size's capture time and memory per
    piece. Nothing for a full capture."""
    pw = getattr(result.backend, "piecewise", None)
    if not pw:
        return []
    named = ", ".join(pw["split_on"]) or "none named"
    lines = [f"split on: {named} (and any op tagged cudagraph_unsafe)"]
    lines += [f"  {s['op']} x{s['count']} at {short_paths(s['file'])}:{s['line']} "
              f"(`{s['code']}`)" if "line" in s else f"  {s['op']} x{s['count']}"
              for s in pw["split_ops"]]
    lines.append(f"pieces: {pw['graph_pieces'] + pw['eager_pieces']} per step, "
                 f"{pw['graph_pieces']} graph(s) and {pw['eager_pieces']} eager splitting "
                 f"op(s); graphs captured: {pw['graphs_per_size']} per size, "
                 f"{pw['total_graphs']} in all (each graph costs a stream on Ascend)")
    for size in pw["sizes"]:
        each = ", ".join(f"#{g['piece']} {g['capture_us'] / 1000:.1f} ms "
                         f"{g['memory_bytes'] / 2**20:.2f} MiB" for g in size["graphs"])
        lines.append(f"  size {size['size']}: {len(size['graphs'])} graph(s): {each}")
    return lines


def trace_lines(result: CaptureReport) -> list[str]:
    from aclcap.capture.trace_report import WRONG  # loaded with the result's trace

    trace = result.trace
    cached = f" (from the cache: traced {result.trace_cache['taken']}, nothing it depends " \
        "on changed since; --no-cache traces again)" if result.trace_cache else ""
    lines = [f"trace: {trace.graph_count} graph(s), {len(trace.graph_breaks)} graph break(s), "
             f"ops per graph {trace.ops_per_graph}{cached}"]
    if failure := trace.error_line():
        lines.append(f"  {failure}")
    if pinned := trace.size_pinned:
        lines.append(f"  the step pins its size at {short_paths(pinned['file'])}:"
                     f"{pinned['line']}: traced with the size suggested dynamic, not "
                     "required; each size is compiled where the step's guards put it")
    for br in trace.graph_breaks:
        lines.append(f"  break at {short_paths(br.file)}:{br.line}: {br.reason}")
    lines.append("custom ops in graph: " + (", ".join(trace.custom_ops_in_graph) or "none"))
    lines += [f"custom op {reason}" for reason in trace.outside_reasons()]
    if missing := trace.missing_fakes():
        from aclcap.capture.advice import fakes_advice

        advice = fakes_advice(result.model_path, missing, result.graph_mode)
        if not trace.error and not any(advice in r.reasons for r in result.rows):
            lines.append(f"  {advice}")  # else the failure or the rows said it already
    for op in trace.custom_ops_wrong_meta:
        lines.append(f"custom op that {WRONG[op.get('defect', 'meta')]}: {op['op']}: "
                     f"{op['reason']}")
    if trace.recompiles:
        # A run that failed before its backend compiled has none to name.
        backend = result.backend.compile_backend
        backend = f", backend {backend}" if backend else ""
        # The sizes that compiled, as the JSON's trace.recompiles has them (set whether or
        # not the capture that followed succeeded).
        lines.append(f"compiles at sizes {[c.size for c in trace.recompiles]}: "
                     f"{len(trace.recompiles)} (torch.compile{backend})")
        lines += [f"  {c.text()}" for c in trace.recompiles]
        if result.fail_on_recompile and result.recompiled():
            lines.append(f"--fail-on-recompile: {len(result.recompiled())} recompile(s) after "
                         "the first size")
    if result.bisect is not None:
        b = result.bisect
        if b.get("backends"):
            lines.append("bisect: the whole step under torch.compile(dynamic=True): " + "; ".join(
                f"{name} {'matches eager' if not why else 'differs: ' + why}"
                for name, why in b["backends"].items()))
        if b.get("layer"):
            lines.append(f"bisect: the mismatch comes from {b['layer']}")
        if b.get("node"):
            lines.append(f"bisect: first diverging node `{b['node']}` ({b['op']}, shape "
                         f"{b['shape']}) at {b['source']}: max abs err {b['max_abs_err']:.3g}"
                         + (f", error {b['error']}" if b.get("error") else ""))
        else:
            lines.append(f"bisect: {b['error']}")
    return lines
