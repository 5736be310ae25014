"""cpu piecewise: torch.compile hands the step's FX graph to a backend that splits it at
the splitting ops; each graph piece becomes an AOTInductor artifact with its size dims
dynamic (cached like the full step's, keyed on the piece's exported program) and is
captured per size over static buffers; the splitting ops run eagerly between the pieces.

Dynamo's guards on the step's own frame are dropped (`guard_filter_fn`), as vLLM drops
them: the step is traced once, at the largest size, and every size reuses it, so size 1
does not recompile and no piece is compiled twice. A step that branches on its size is
therefore replayed on the branch of the traced size, and replay == eager is what catches
it. Frames compiled after a graph break keep their guards (one code object may serve many
callers); one that recompiles at a later size is captured again at every size.

A piece that takes what export cannot (vLLM's opaque `LayerName`), or that export fails
on, is compiled by Inductor instead, as vLLM compiles its pieces (`_inductor_piece`)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.export import Dim

from aclcap._compat import (
    compiling_frame,
    frame_compiler,
    inductor_compiler,
    op_names,
    reset_dynamo,
)
from aclcap._tensors import clone_tensors
from aclcap.errors import CaptureError, UsageError, first_line, step_failures
from aclcap.graph.backends.aoti import AotiBackend, NotCarried
from aclcap.graph.backends.base import BackendSummary, Captured, StepContext
from aclcap.graph.compiles import CompileLog
from aclcap.graph.export import is_size_guard
from aclcap.graph.options import StepOptions
from aclcap.graph.piecewise.layout import program_inputs, same_layout
from aclcap.graph.piecewise.pieces import (
    CompiledPiece,
    GraphPiece,
    refresh_changed,
    splitting_ops_inside,
)
from aclcap.graph.piecewise.split import Piece, SplitStep, op_name, split_graph
from aclcap.host_values import input_names
from aclcap.loading.op_names import nearby

MECHANISM = "aoti-piecewise"


@dataclass
class PiecewiseSummary(BackendSummary):
    piecewise: dict[str, Any] | None = None  # pieces, split ops, per-size graphs


def _guards_kept(hosted: frozenset[str], every: bool = False) -> Callable[[list], list[bool]]:
    """The step's own frame (the first one compiled: its forward) runs without
    Dynamo's guards, as vLLM runs its one graph, but for the length of a host list input
    (`seq_lens`, one per token): the traced code unpacks it item by item, so each length
    compiles its own. Every other frame (a frame resumed after a graph break, a library
    wrapper such as transformers' deprecation decorator, whose one code object serves many
    callers) keeps its guards: without them, its first caller's compile ran for every later
    caller and every size (issue 50: jetmoe's `KeyError: 'input_ids'`). `every`: a step
    that pins its own size keeps every guard, each of its graphs serving its own sizes."""
    top: list[int | None] = []

    def keep(entries: list) -> list[bool]:
        if every:
            return [True] * len(entries)
        frame = compiling_frame()
        if not top:  # the step's forward is the first frame entered, so compiled first
            top.append(frame)
        if frame != top[0]:
            return [True] * len(entries)
        return [e.name in hosted and e.guard_type.endswith("LENGTH") for e in entries]

    return keep


class _SizePinned(CaptureError):
    """A piece's export met a guard on the size: the step pins its own size."""


def _export_piece(gm: torch.fx.GraphModule, args: tuple, dynamic: bool
                  ) -> torch.export.ExportedProgram:
    """The piece exported on copies of its inputs in their own layouts (the artifact assumes
    them): its size dims dynamic, or every size static (its inputs' own shapes)."""
    with torch.no_grad():
        return torch.export.export(
            gm, tuple(same_layout(a) if isinstance(a, torch.Tensor) else a for a in args),
            dynamic_shapes=_dynamic_shapes(gm) if dynamic else None)


def _learn_host_symbols(step: StepContext, size: int) -> None:
    """Two calls on different draws, under Dynamo's automatic dynamic: an int (or list
    item) input that changed is traced as a symbol from then on, in every later compile of
    the step (until Dynamo is reset). The split step then hands a splitting op this step's
    host values, not the trace's: an op run eagerly between pieces gets them live."""
    convert_frame, reset_code = frame_compiler()
    probe = torch.compile(step.model, backend="eager")
    with torch.no_grad():
        for _ in range(2):
            probe(*step.mark(step.inputs(size), size))
    # The probe's compiled code goes (as Dynamo's reset_code_caches drops it, without
    # the automatic-dynamic state that function drops too): the step's first compile is
    # then a first compile in the compile log, not a backend mismatch.
    for weak in convert_frame.input_codes.seen + convert_frame.output_codes.seen:
        if (code := weak()) is not None:
            reset_code(code)


def _dim(size: Any, tokens: Any) -> Any:
    """The export Dim of one traced dim: a bare size symbol is `tokens` (every size symbol is
    the step's token count, as the full backend exports it), `a * s + b` is derived from it
    (a piece may receive `torch.cat` of two token-long tensors); None: static."""
    if not isinstance(size, torch.SymInt):
        return None
    expr = size.node.expr
    if len(expr.free_symbols) != 1:
        return None
    sym = next(iter(expr.free_symbols))
    a, b = expr.coeff(sym), expr.subs(sym, 0)
    if not (a.is_Integer and b.is_Integer and a > 0 and (expr - a * sym - b) == 0):
        return None
    derived = tokens if a == 1 else int(a) * tokens
    return derived if b == 0 else derived + int(b)


def _dynamic_shapes(gm: torch.fx.GraphModule) -> tuple:
    """Per input of a piece, its dims that follow the step's size."""
    tokens = Dim("tokens", min=1)
    shapes = []
    for node in (n for n in gm.graph.nodes if n.op == "placeholder"):
        value = node.meta.get("example_value")
        dims = {d: dim for d, s in enumerate(getattr(value, "shape", ()))
                if (dim := _dim(s, tokens)) is not None}
        shapes.append(dims or None)
    # A recompiled GraphModule's forward reads as (*args): its inputs are then one tuple.
    varargs = any(p.kind is p.VAR_POSITIONAL
                  for p in inspect.signature(gm.forward).parameters.values())
    return (tuple(shapes),) if varargs else tuple(shapes)


def _inductor_piece(piece: Piece, gm: torch.fx.GraphModule) -> CompiledPiece:
    """A piece that takes a value export cannot (vLLM's opaque `LayerName`, which AOTI's
    extern kernels refuse), compiled by Inductor as vLLM compiles its pieces: on Dynamo's
    example values (symbolic sizes, so one compile serves every size), called with every
    input live."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    examples = [n.meta.get("example_value") for n in placeholders]
    rebuild = _sizes_as_ints(gm)
    try:
        fn = inductor_compiler({})(gm, examples)
    except Exception as exc:
        raise CaptureError(f"piecewise: Inductor could not compile piece {piece.index}: "
                           f"{first_line(exc)}") from exc

    def run(inputs: list) -> list:
        out = fn(*inputs)  # compile_fx's function takes the inputs as arguments
        return rebuild(list(out) if isinstance(out, (tuple, list)) else [out])

    return CompiledPiece(run, [e for e in examples if isinstance(e, torch.Tensor)],
                         takes_all=True)


def _sizes_as_ints(gm: torch.fx.GraphModule) -> Callable[[list], list]:
    """Inductor compiles no graph that returns a `torch.Size` (a piece hands the next one a
    shape it read, as Qwen3's q/k norms do): each such output becomes its dims, and the
    returned function puts the sizes back together after a run."""
    import operator

    out = next(n for n in gm.graph.nodes if n.op == "output")
    items = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    spans: list[int | None] = []  # per output: the number of dims of a Size, else None
    flat: list[Any] = []
    for item in items:
        value = item.meta.get("example_value") if isinstance(item, torch.fx.Node) else None
        if isinstance(value, torch.Size):
            with gm.graph.inserting_before(out):
                flat += [gm.graph.call_function(operator.getitem, (item, d))
                         for d in range(len(value))]
            spans.append(len(value))
        else:
            flat.append(item)
            spans.append(None)
    if all(span is None for span in spans):
        return lambda outputs: outputs
    out.args = (tuple(flat),)
    gm.recompile()

    def rebuild(outputs: list) -> list:
        given, back = iter(outputs), []
        for span in spans:
            back.append(next(given) if span is None else
                        torch.Size([next(given) for _ in range(span)]))
        return back

    return rebuild


def _freeze_host_floats(gm: torch.fx.GraphModule, args: tuple) -> None:
    """A float host value (`temperature`) reaches a piece as Dynamo passes an unspecialized
    float: a 0-d float64 input read with `.item()`, a SymFloat that export cannot hand a
    custom op taking `float`. A graph piece is captured with its host values frozen (a
    splitting op, run eagerly, gets them live), so the read is replaced by its value at
    capture, as an int is: the host-value report then names it frozen like any other."""
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(inputs, args, strict=False):
        if not (isinstance(value, torch.Tensor) and value.dim() == 0
                and value.dtype == torch.float64):
            continue
        reads = list(node.users)
        if not reads or not all(r.target is torch.ops.aten.item.default
                                or (r.op == "call_method" and r.target == "item")
                                for r in reads):
            continue
        for read in reads:  # a value handed on to a splitting op stays live: never frozen
            if all(user.op != "output" for user in read.users):
                read.replace_all_uses_with(value.item())  # type: ignore[arg-type]
                gm.graph.erase_node(read)
    gm.graph.lint()
    gm.recompile()


class PiecewiseAotiBackend:
    mechanism = MECHANISM
    compile_log_in_trace = False  # its compile splits and compiles the pieces it captures

    def __init__(self, options: StepOptions,
                 refresh: Callable[[str, torch.Tensor, torch.Tensor], bool] = refresh_changed
                 ) -> None:
        self.options = options
        self.aoti = AotiBackend(options)  # its artifact cache, per piece
        self.refresh = refresh
        self.compile_backend = self._split_backend  # what torch.compile is given
        self.phases_s: dict[str, float] = {}
        self.splits: list[SplitStep] = []
        self.called: set[str] = set()  # the ops Dynamo's graphs call, by ns::name
        self.pieces: list[GraphPiece] = []
        self.artifacts: list[dict[str, Any]] = []
        self.names: frozenset[str] = frozenset()
        self.facts = PiecewiseSummary()
        self._step: StepContext | None = None
        self._capturing: int | None = None

    def summary(self) -> BackendSummary:
        return replace(self.facts, compile_backend="piecewise (split_module, aoti per piece)",
                       inductor_configs=self.options.inductor_configs())

    def _split_backend(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        """Dynamo's graph -> the split step, each graph piece replaced by its runner."""
        assert self._step is not None
        step = self._step
        split = split_graph(gm, self.names, step.spec.path)
        weights = {t.data_ptr() for t in (*step.model.parameters(), *step.model.buffers())}
        for piece in split.pieces:
            if piece.splitting_op is None:
                sub = getattr(split.module, piece.name)
                runner = GraphPiece(piece, sub, split.sources[piece.name], self._compile,
                                    lambda g, a: splitting_ops_inside(g, a, self.names,
                                                                      step.spec.path),
                                    self.refresh)
                runner.weights = weights
                runner.capturing = self._capturing  # traced within a capture's call
                delattr(split.module, piece.name)
                setattr(split.module, piece.name, runner)
                self.pieces.append(runner)
        self.splits.append(split)
        self.called |= {name for n in gm.graph.nodes if n.op == "call_function"
                        and (name := op_name(n.target)) is not None}
        return split.module

    def _compile(self, piece: Piece, gm: torch.fx.GraphModule, args: tuple) -> CompiledPiece:
        """Export the piece with its size dims dynamic, on copies of its inputs in their own
        layouts (the artifact assumes them), and compile (or load) its artifact."""
        assert self._step is not None
        t0 = time.perf_counter()
        opaque = ", ".join(type(a).__name__ for a in args
                           if not isinstance(a, (torch.Tensor, int, float, bool)))
        mechanism = self.options.cpu_mechanism
        if opaque and mechanism == "aoti":
            raise CaptureError(f"piecewise: piece {piece.index} takes an opaque value "
                               f"({opaque}), which an AOTI artifact cannot carry: "
                               "--cpu-mechanism auto compiles such a piece with Inductor")
        exported, shapes = None, None
        if mechanism == "inductor":
            why = "--cpu-mechanism inductor"
        elif opaque:
            why = f"it takes an opaque value ({opaque})"
        else:
            _freeze_host_floats(gm, args)
            try:
                exported = _export_piece(gm, args, dynamic=True)
            except Exception as exc:
                failed = f"piecewise: torch.export of piece {piece.index} failed"
                if is_size_guard(exc):
                    # A piece whose graph specializes its size cannot be compiled once for
                    # all sizes, by Inductor either (nothing checks a piece's guards at
                    # replay): the step pins its size. Captured again from the start with
                    # every guard kept (capture), this piece is then exported for these
                    # shapes alone, and each other size compiles its own.
                    if not self._step.size_suggested:
                        raise _SizePinned(f"{failed}: {first_line(exc)}") from exc
                    shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
                    try:
                        exported = _export_piece(gm, args, dynamic=False)
                    except Exception as again:
                        raise CaptureError(f"{failed} even static: {first_line(again)}"
                                           ) from again
                elif mechanism == "aoti":
                    raise CaptureError(f"{failed}: {first_line(exc)}") from exc
                else:
                    why = f"torch.export failed: {first_line(exc)}"
        if exported is not None:
            try:
                runner, _, facts = self.aoti.artifact(exported, self._step.spec)
            except NotCarried as exc:  # AOTInductor refused what export took
                if mechanism == "aoti":
                    raise
                why = str(exc)
            else:
                self.artifacts.append({"piece": piece.index, **facts})
                self._lap(t0)
                # runner: the artifact's AOTIModelPackageLoader
                return CompiledPiece(lambda flat: runner.run(flat), program_inputs(exported),
                                     shapes=shapes)
        compiled = _inductor_piece(piece, gm)  # as vLLM compiles its pieces
        self.artifacts.append({"piece": piece.index, "compiler": "inductor",
                               "why": why, "artifact_bytes": 0, "cache_hit": False})
        self._lap(t0)
        return compiled

    def _lap(self, t0: float) -> None:
        """A piece's compile or load time, added to the run's."""
        self.phases_s["compile_or_load"] = round(
            self.phases_s.get("compile_or_load", 0.0) + time.perf_counter() - t0, 3)

    def capture(self, step: StepContext, sizes: list[int],
                on_size: Callable[[int], None] | None = None,
                log: CompileLog | None = None) -> list[Captured]:
        """Trace once at the largest size, split, then per size (largest first) run the
        step once with every graph piece capturing: that run compiles each piece (first
        size only) and captures it over its static buffers. Where a piece's export finds
        the step pinning its size (mamba's `Eq(s // 2, 1)`), once more from the start with
        every guard kept and the size only suggested dynamic: a graph per guard, a piece
        artifact per size where export cannot make it dynamic."""
        try:
            return self._capture_all(step, sizes, on_size, log)
        except _SizePinned:
            if step.size_suggested:
                raise
            step.size_suggested = True
            self.splits, self.called, self.pieces, self.artifacts = [], set(), [], []
            if log is not None:
                log.reset()
            reset_dynamo()
            return self._capture_all(step, sizes, on_size, log)

    def _capture_all(self, step: StepContext, sizes: list[int],
                     on_size: Callable[[int], None] | None, log: CompileLog | None
                     ) -> list[Captured]:
        self._step = step
        self.names = frozenset(self.options.split_ops if self.options.split_ops is not None
                               else step.spec.splitting_ops)
        self.phases_s = {}
        log = log or CompileLog(self.compile_backend, step.spec.path)
        if step.hosts:
            _learn_host_symbols(step, max(sizes))
        names = input_names(step.model, len(step.dims))
        compiled = torch.compile(step.model, backend=log.backend, options={
            "guard_filter_fn": _guards_kept(frozenset(names[i] for i in step.hosts),
                                            every=step.size_suggested)})
        order = sorted(sizes, reverse=True)
        captured = [self._capture_at(order[0], compiled, log, on_size)]
        first = len(self.pieces)
        captured += [self._capture_at(size, compiled, log, on_size) for size in order[1:]]
        if len(self.pieces) > first:
            # A frame compiled after a graph break was recompiled at a later size (Dynamo's
            # automatic dynamic): its new, dynamic compile now serves the earlier sizes too,
            # which its pieces never captured. One more pass captures them there.
            captured = [self._capture_at(size, compiled, log, on_size) for size in order]
        self._check_split_ops()
        compilers = {a.get("compiler", "aoti") for a in self.artifacts}
        self.mechanism = {frozenset({"inductor"}): "inductor-piecewise",
                          frozenset({"aoti", "inductor"}): "aoti+inductor-piecewise"
                          }.get(frozenset(compilers), MECHANISM)
        self.facts = PiecewiseSummary(capture_order=order, piecewise=self._facts(order),
                                      artifact_bytes=sum(a["artifact_bytes"]
                                                         for a in self.artifacts),
                                      cache_hit=all(a["cache_hit"] for a in self.artifacts))
        return captured

    def _check_split_ops(self) -> None:
        """An op of --split-ops that no traced graph calls splits nowhere: bad input, named
        with what the graphs call instead (issue 50: `aten::scaled_dot_product_attention`
        was taken and split nowhere, silently)."""
        if self.options.split_ops is None:
            return
        split = {p.splitting_op for s in self.splits for p in s.pieces if p.splitting_op}
        if missing := sorted(set(self.options.split_ops) - split - self.called):
            known = {name.split(".", 1)[0] for name in op_names()}
            if unknown := [m for m in missing if m not in known]:  # not even after the build
                raise UsageError(f"--split-ops {unknown[0]}: {nearby(unknown[0], known)}")
            called = ", ".join(sorted(self.called)) or "no registered op"
            aten = " (Dynamo's graph holds torch functions, not aten ops: split at a custom " \
                "op)" if any(m.startswith("aten::") for m in missing) else ""
            raise UsageError(f"--split-ops {','.join(missing)}: the traced step calls no such "
                             f"op{aten}; its graphs call {called}")

    def _capture_at(self, size: int, compiled: Callable, log: CompileLog,
                    on_size: Callable[[int], None] | None) -> Captured:
        """Run the step once at `size` with every graph piece capturing."""
        if on_size:
            on_size(size)
        assert self._step is not None
        # Copies, as every replay passes: Dynamo guards a view input through its base
        # (`position_ids._base.size()[0]` for an `arange(...).unsqueeze(0)`), which a copy
        # lacks, so a step that keeps its guards compiled again at replay, on pieces that
        # never captured (recurrent_gemma: "piece 0 has no graph").
        static = self._step.mark(clone_tensors(self._step.inputs(size)), size)
        self._capturing = size
        for piece in self.pieces:
            piece.capturing = size
        try:
            # the step's own failure among its pieces (qwen2_moe's experts, whose token
            # counts follow the router's values across graph breaks): a failed size
            with torch.no_grad(), step_failures(f"piecewise: the step fails at size {size} "
                                                "while its graph pieces capture"):
                log.call(compiled, size, static)
        finally:
            self._capturing = None
            for piece in self.pieces:
                piece.capturing = None
        graphs = [p.by_size[size] for p in self.pieces if size in p.by_size]
        return Captured(size, sum(g.capture_us for g in graphs),
                        sum(g.memory_bytes for g in graphs), _replayer(compiled), static,
                        static)

    def _facts(self, order: list[int]) -> dict[str, Any]:
        """Pieces, the ops the step was split on (with their lines), graphs per size and
        in all (what Ascend's stream budget counts), per size each piece's capture. A step
        traced once per size (a host list as long as the size) is split once per trace:
        one step's pieces are one split's, never the sum over sizes."""
        pieces = max((s.pieces for s in self.splits), key=len, default=[])
        split_ops: dict[tuple, dict[str, Any]] = {}
        for p in pieces:
            if p.splitting_op:
                key = (p.splitting_op, p.site.line if p.site else None)
                entry = split_ops.setdefault(key, {"op": p.splitting_op, "count": 0,
                                                   **({"file": p.site.file, "line": p.site.line,
                                                       "code": p.site.code} if p.site else {})})
                entry["count"] += 1
        per_size = [{"size": size, "graphs": [
            {"piece": p.piece.index, "capture_us": round(p.by_size[size].capture_us, 1),
             "memory_bytes": p.by_size[size].memory_bytes}
            for p in self.pieces if size in p.by_size]} for size in order]
        graphs = sum(p.splitting_op is None for p in pieces)
        return {"split_on": sorted(self.names), "pieces": [p.to_dict() for p in pieces],
                "graph_pieces": graphs, "eager_pieces": len(pieces) - graphs,
                "split_ops": list(split_ops.values()), "graphs_per_size": graphs,
                "total_graphs": sum(len(s["graphs"]) for s in per_size), "sizes": per_size,
                "artifacts": self.artifacts}


def _replayer(compiled: Callable) -> Callable[[tuple], Any]:
    """A replay is the compiled step's call: Dynamo (no guards) runs the split step, whose
    graph pieces replay their captures and whose splitting ops run eagerly."""

    def replay(args: tuple) -> Any:
        with torch.no_grad():
            return compiled(*args)

    return replay
