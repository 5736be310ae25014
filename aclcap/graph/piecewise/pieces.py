"""A graph piece at run time: compiled once, captured per size over static buffers and
replayed the way a device graph replays: it reads only the buffers it was captured with.

A piece's input is refreshed (copied into its static buffer) whenever it is not that
buffer. A graph piece's outputs are its own static buffers, so the next piece finds them
where it was captured and copies nothing; a splitting op's output is a fresh allocation
each step, and a piece that trusted it to stay put (as a wrapper that refreshes only the
step's own inputs does) would replay on the capture's stale values."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aclcap._compat import TorchDispatchMode
from aclcap.errors import CaptureError, cut_middle, first_line, step_failures
from aclcap.graph.piecewise.layout import expected_strides, in_layout
from aclcap.graph.piecewise.split import Piece, node_site, splits_on


@dataclass
class CompiledPiece:
    """A piece's artifact: `run` on a flat list of tensors, and the fake values of its
    inputs as exported, whose strides the artifact assumes (`layout.py`). `takes_all`: an
    Inductor-compiled piece, whose `run` takes every input in order, its host and opaque
    values too (vLLM's `LayerName`), live at each call."""

    run: Callable[[list], list]
    inputs: list[torch.Tensor]
    takes_all: bool = False
    # The input shapes it was compiled static for (a piece of a step that pins its size,
    # which export cannot make dynamic): another shape compiles its own. None: dynamic.
    shapes: tuple | None = None


# Compiles a piece on its first inputs.
Compiler = Callable[[Piece, torch.fx.GraphModule, tuple], CompiledPiece]


def refresh_changed(source: str, arg: torch.Tensor, static: torch.Tensor) -> bool:
    """aclcap's rule: copy every input that is not the captured buffer itself."""
    return arg.data_ptr() != static.data_ptr()


@dataclass
class PieceGraph:
    """One piece captured at one size."""

    inputs: list[torch.Tensor]  # the static buffers (a weight or a graph piece's output as is)
    outputs: list[torch.Tensor]
    mutated: list[int]
    capture_us: float = 0.0
    memory_bytes: int = 0
    compiled: CompiledPiece | None = None  # what replays it (the piece's, or its size's own)
    host: tuple = ()  # the plain host values (ints, floats, their lists) it was captured with


class _SplitOpsSeen(TorchDispatchMode):
    """Every op the dispatcher runs that should have been a split point."""

    def __init__(self, names: frozenset[str]) -> None:
        super().__init__()
        self.names = names
        self.hits: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        if name := splits_on(func, self.names):
            self.hits.append(name)
        return func(*args, **(kwargs or {}))


def splitting_ops_inside(gm: torch.fx.GraphModule, args: tuple, names: frozenset[str],
                         model_file: Path) -> list[str]:
    """Run the piece eagerly on copies of its inputs and name each splitting op (or op
    tagged cudagraph_unsafe) it dispatches, with the model line of the node that called it:
    an op reached through a composite is not in Dynamo's graph, so only running finds it."""
    seen = _SplitOpsSeen(names)
    found: list[str] = []

    class _Locate(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            before = len(seen.hits)
            out = super().run_node(n)
            if len(seen.hits) > before:
                site = node_site(n, model_file)
                where = f" at {site.text()}" if site else ""
                found.append(f"{seen.hits[-1]} runs inside a graph piece{where}: it is a "
                             "splitting op (named in SPLITTING_OPS or tagged "
                             "cudagraph_unsafe), so a device graph would record it; call it "
                             "directly in the step instead of through another op")
            return out

    copies = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
    with torch.no_grad(), seen:
        _Locate(gm).run(*copies)
    return list(dict.fromkeys(found))


class GraphPiece(torch.nn.Module):
    """Stands in for one graph piece's submodule in the split step."""

    def __init__(self, piece: Piece, gm: torch.fx.GraphModule, sources: list[str],
                 compiler: Compiler, check: Callable[[torch.fx.GraphModule, tuple], list[str]],
                 refresh: Callable[[str, torch.Tensor, torch.Tensor], bool] = refresh_changed
                 ) -> None:
        super().__init__()
        self.piece, self.gm, self.sources = piece, gm, sources
        self.compiler, self.check, self.refresh = compiler, check, refresh
        self.compiled: CompiledPiece | None = None
        self.graphs: dict[tuple, PieceGraph] = {}
        self.by_size: dict[int, PieceGraph] = {}  # what each capture size captured
        self.capturing: int | None = None  # the size being captured; None: replay only
        self.weights: set[int] = set()  # data pointers of the model's parameters and buffers
        self.args: tuple = ()  # this call's inputs
        out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        self.single = not isinstance(out, (tuple, list))

    def forward(self, *args: Any) -> Any:
        self.args = args  # the non-tensor values an Inductor-compiled piece takes live
        # A host value (an int the step computed from its host inputs) is a constant of the
        # piece's artifact, frozen at its compile as a device graph freezes it: only the
        # tensors are the graph's inputs.
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        key = tuple((tuple(a.shape), a.dtype) for a in tensors)
        graph = self.graphs.get(key)
        if graph is None:
            if self.capturing is None:
                shapes = [list(a.shape) for a in tensors]
                more = f" and {len(shapes) - 3} more" if len(shapes) > 3 else ""
                raise CaptureError(f"piecewise: piece {self.piece.index} has no graph for "
                                   f"input shapes {str(shapes[:3])[1:-1]}{more}")
            graph = self._capture(args)
            self.graphs[key] = self.by_size[self.capturing] = graph
            return self._outputs(graph)
        if self.capturing is not None and (host := _plain_host_values(args)) != graph.host:
            # Called twice in the step being captured, one graph a size: a device graph
            # replays the values it captured (jetmoe's experts take their token counts, read
            # with .tolist(), once in each layer). A later step's values are the host-value
            # analysis's to judge (frozen, stale or not).
            raise CaptureError(f"piecewise: graph piece {self.piece.index} is called at one "
                               f"size with other host values than it was captured with "
                               f"({_shown(graph.host)}, then {_shown(host)}): a graph "
                               "replays the values it captured")
        return self._outputs(self._replay(graph, tensors))

    def _inputs(self, tensors: list[torch.Tensor]) -> list:
        """What the compiled piece runs on: the tensors alone (an AOTI artifact freezes its
        host values), or every input with the tensors in place (an Inductor-compiled one)."""
        assert self.compiled is not None
        if not self.compiled.takes_all:
            return list(tensors)
        given = iter(tensors)
        return [next(given) if isinstance(a, torch.Tensor) else a for a in self.args]

    def _outputs(self, graph: PieceGraph) -> Any:
        return graph.outputs[0] if self.single else tuple(graph.outputs)

    def _capture(self, args: tuple) -> PieceGraph:
        shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
        if self.compiled is None:  # the first (largest) size: check, then compile once
            if problems := self.check(self.gm, args):
                raise CaptureError("; ".join(problems))
            self.compiled = self.compiler(self.piece, self.gm, args)
            self.sources = [s for s, a in zip(self.sources, args, strict=True)
                            if isinstance(a, torch.Tensor)]
        elif self.compiled.shapes is not None and self.compiled.shapes != shapes:
            self.compiled = self.compiler(self.piece, self.gm, args)  # static: its own
        args = tuple(a for a in args if isinstance(a, torch.Tensor))
        # A weight, a step input (the capture's own input buffer, as a full graph's is) or a
        # graph piece's output is its own static buffer, written in place; a splitting op's
        # output is copied, as is a buffer in another layout than the artifact assumes.
        strides = expected_strides(self.compiled.inputs, args)
        statics = [in_layout(a, layout, copy=source == "eager" and
                             a.data_ptr() not in self.weights)
                   for a, source, layout in zip(args, self.sources, strides, strict=True)]
        before = [s.clone() for s in statics]
        t0 = time.perf_counter()
        try:
            outputs = list(self.compiled.run(self._inputs(statics)))
        except Exception as exc:  # e.g. a dim the export kept static, at another size
            raise CaptureError(f"piecewise: graph piece {self.piece.index} fails its first run "
                               f"at input shapes {[list(a.shape) for a in args]}: "
                               f"{first_line(exc)}") from exc
        capture_us = (time.perf_counter() - t0) * 1e6
        mutated = [i for i, (a, b) in enumerate(zip(before, statics, strict=True))
                   if not torch.equal(a, b)]
        graph = PieceGraph(statics, outputs, mutated, capture_us, compiled=self.compiled,
                           host=_plain_host_values(self.args))
        for i in mutated:
            if args[i].data_ptr() != statics[i].data_ptr():
                args[i].copy_(statics[i])
        owned = [s for s, a in zip(statics, args, strict=True) if s is not a] + outputs
        graph.memory_bytes = sum(t.untyped_storage().nbytes() for t in owned
                                 if isinstance(t, torch.Tensor))
        return graph

    def _replay(self, graph: PieceGraph, args: tuple) -> PieceGraph:
        for source, arg, static in zip(self.sources, args, graph.inputs, strict=True):
            if self.refresh(source, arg, static):
                static.copy_(arg)
        assert graph.compiled is not None  # set by the capture that made `graph`
        inputs = self._inputs(graph.inputs)
        # e.g. host ints the inputs' sizes follow, read from data (jetmoe's expert counts)
        with step_failures(f"piecewise: graph piece {self.piece.index} fails its replay at "
                           f"input shapes {[list(a.shape) for a in args]}"):
            outs = graph.compiled.run(inputs)
        for static_out, out in zip(graph.outputs, outs, strict=True):
            # a shape a piece hands on (torch.Size) is the same at every replay of a size
            if isinstance(out, torch.Tensor) and out.data_ptr() != static_out.data_ptr():
                static_out.copy_(out)
        for i in graph.mutated:
            if args[i].data_ptr() != graph.inputs[i].data_ptr():
                args[i].copy_(graph.inputs[i])
        return graph


def _plain_host_values(args: tuple) -> tuple:
    """The ints, floats and bools among a piece's inputs, lists of them too: what a graph
    holds as captured. Opaque values (vLLM's layer names) and SymInts are left out."""
    def plain(a: Any) -> bool:
        return type(a) in (int, float, bool) or (
            isinstance(a, (list, tuple)) and all(type(v) in (int, float, bool) for v in a))
    return tuple(a for a in args if plain(a))


def _shown(values: tuple) -> str:
    return cut_middle(", ".join(map(str, values)) or "none", 80)
