"""Split a Dynamo graph at its splitting ops with torch.fx.passes.split_module, as vLLM's
piecewise backend does, after two rewrites that keep each piece self-contained:

- sizes (SymInts) and views never cross a piece boundary: each is recomputed in the piece
  that uses it. A piece's inputs are then tensors only (an AOTI artifact cannot take a size
  as an int input), and a view of a step input (a layer's slice of the KV cache) still
  aliases that input where a splitting op writes through it, instead of being a copy the
  previous piece made;
- the getitems of a splitting op's outputs stay with it, so an op with several outputs hands
  the next piece tensors, not a tuple, and no partition depends on a later one (the cycle
  vLLM hit).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.fx.passes.split_module import split_module
from torch.multiprocessing.reductions import StorageWeakRef

from aclcap._compat import OpOverload, OpOverloadPacket


def op_name(target: Any) -> str | None:
    """`ns::op` of an op call in an FX graph (a packet or an overload), else None."""
    if isinstance(target, OpOverload):
        return target._schema.name
    if isinstance(target, OpOverloadPacket):
        return target._qualified_op_name
    return None


def _tagged_unsafe(target: Any) -> bool:
    """torch.Tag.cudagraph_unsafe on the overload (or any overload of the packet)."""
    if isinstance(target, OpOverload):
        return torch.Tag.cudagraph_unsafe in target.tags
    if isinstance(target, OpOverloadPacket):
        return any(torch.Tag.cudagraph_unsafe in getattr(target, o).tags
                   for o in target.overloads())
    return False


def splits_on(target: Any, names: frozenset[str]) -> str | None:
    """The op's name when a call of `target` is a split point: named in the splitting ops,
    or tagged cudagraph_unsafe (always, as vLLM does)."""
    name = op_name(target)
    if name is None:
        return None
    return name if name in names or _tagged_unsafe(target) else None


@dataclass
class Site:
    """Where in the model file a node came from."""

    file: str
    line: int
    code: str
    # the call's column on its line, where known: two calls on one line are two calls (a
    # loop's calls of one line share it); never part of equality (a line is a line)
    column: int | None = field(default=None, compare=False)

    def text(self) -> str:
        return f"{Path(self.file).name}:{self.line} (`{self.code}`)"


def node_site(node: torch.fx.Node, model_file: Path) -> Site | None:
    """The innermost frame of the model file in the node's stack trace (Dynamo keeps one)."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.splitlines()
    site = None
    for i, text in enumerate(lines):
        text = text.strip()
        if text.startswith("File ") and Path(text.split('"')[1]).resolve() == \
                model_file.resolve():
            line = int(text.split("line ")[1].split(",")[0])
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            site = Site(str(model_file), line, code)
    return site


@dataclass
class Piece:
    """One submodule of the split step: a graph piece (captured) or a splitting op (eager)."""

    index: int
    name: str  # the split module's attribute, submod_N
    splitting_op: str | None  # None: a graph piece
    site: Site | None  # a splitting op's model-file line
    nodes: int  # ops in the piece

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "kind": "eager" if self.splitting_op
                             else "graph", "ops": self.nodes}
        if self.splitting_op:
            d["op"] = self.splitting_op
            if self.site:
                d.update(file=self.site.file, line=self.site.line, code=self.site.code)
        return d


@dataclass
class SplitStep:
    module: torch.fx.GraphModule  # calls the pieces in order
    pieces: list[Piece]
    # Per graph piece, where each of its inputs comes from: "weight" (a parameter or buffer
    # of the model), "input" (a step input), "graph" (another graph piece's output) or
    # "eager" (a splitting op's output or a view of a step input made eagerly).
    sources: dict[str, list[str]]


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def _is_size(node: torch.fx.Node) -> bool:
    return isinstance(_value(node), (torch.SymInt, torch.SymBool, int, bool)) \
        and node.op != "placeholder"


def _is_view(node: torch.fx.Node) -> bool:
    """A tensor sharing the storage of a tensor argument, made by an op that writes nothing
    (a trailing underscore is an in-place op, which also returns its input)."""
    value = _value(node)
    if node.op not in ("call_function", "call_method") or not isinstance(value, torch.Tensor):
        return False
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if name.endswith("_") or op_name(node.target) is not None:
        return False
    ref = _storage(value)
    args = [_storage(_value(a)) for a in node.all_input_nodes
            if isinstance(_value(a), torch.Tensor)]
    return ref is not None and any(a is not None and a == ref for a in args)


def _storage(value: torch.Tensor) -> StorageWeakRef | None:
    """The storage a tensor example value lives in; None for the tensors that have none
    (functorch's batched values inside a vmap, as associative_scan traces: a subgraph's
    value, never a view to copy)."""
    try:
        return StorageWeakRef(value.untyped_storage())
    except (NotImplementedError, RuntimeError):
        return None


def _localize_sizes(gm: torch.fx.GraphModule) -> None:
    """Each size placeholder is read off a tensor placeholder holding it (`sym_size`), right
    before every use, so no piece takes a size as an input."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for ph in placeholders:
        sym = _value(ph)
        if not isinstance(sym, torch.SymInt) or not ph.users:
            continue
        holder = next(((t, d) for t in placeholders if isinstance(_value(t), torch.Tensor)
                       for d, s in enumerate(_value(t).shape)
                       if isinstance(s, torch.SymInt) and s.node.expr == sym.node.expr), None)
        if holder is None:  # a host value (`seq_lens[0]`), not a size: passed as it is
            continue
        for user in list(ph.users):
            with graph.inserting_before(user):
                size = graph.call_function(torch.ops.aten.sym_size.int, holder)
            size.meta["example_value"] = sym
            user.replace_input_with(ph, size)


def _rematerialize(gm: torch.fx.GraphModule) -> None:
    """Sizes and views are recomputed right before each user (latest first, so a chain is
    copied whole): they cost nothing and then never cross a piece boundary."""
    graph = gm.graph
    for node in reversed(list(graph.nodes)):
        if not (_is_size(node) or _is_view(node)):
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_before(user):
                copy = graph.node_copy(node)
            user.replace_input_with(node, copy)


def _partitions(gm: torch.fx.GraphModule, names: frozenset[str]) -> tuple[dict, dict]:
    """Partition ids in graph order: a splitting op (and the getitems of its outputs) alone,
    everything between two of them together; a size or view goes with its only user, and
    moves to just before it: Dynamo puts a view taken in a call's arguments (`layer(h,
    k_cache[:, i])`) before the code that computes the other arguments, and split_module,
    which makes the submodules in the order their nodes first appear, would call that
    partition before the one that computes them."""
    part, current, split_ops = {}, 0, {}
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    for node in nodes:
        if node.op == "call_function" and (op := splits_on(node.target, names)):
            current += 1
            part[node] = current
            split_ops[current] = (op, node)
            current += 1
        elif node.target is operator.getitem and node.args[0] in part \
                and part[node.args[0]] in split_ops:
            part[node] = part[node.args[0]]
        else:
            part[node] = current
    for node in reversed(nodes):
        if (_is_size(node) or _is_view(node)) and len(node.users) == 1:
            user = next(iter(node.users))
            if user in part:
                part[node] = part[user]
                user.prepend(node)
    return part, split_ops


def split_graph(gm: torch.fx.GraphModule, names: frozenset[str], model_file: Path
                ) -> SplitStep:
    """Split `gm` (Dynamo's graph) at its splitting ops."""
    _localize_sizes(gm)
    _rematerialize(gm)
    gm.recompile()
    part, split_ops = _partitions(gm, names)
    split = split_module(gm, None, lambda n: part[n], keep_original_order=True)
    _drop_unused_sizes(split)
    pieces, kinds = [], {}
    for node in split.graph.nodes:
        if node.op != "call_module":
            continue
        pid = int(node.target.rsplit("_", 1)[1])
        op, origin = split_ops.get(pid, (None, None))
        sub = getattr(split, node.target)
        ops = sum(1 for n in sub.graph.nodes if n.op in ("call_function", "call_method"))
        pieces.append(Piece(len(pieces), node.target, op,
                            node_site(origin, model_file) if origin else None, ops))
        kinds[node.target] = "eager" if op else "graph"
    views = _hoist_input_views(split, kinds)
    sources = {}
    for node in split.graph.nodes:
        if node.op == "call_module" and kinds[node.target] == "graph":
            sources[node.target] = ["input" if a in views else _source(a, kinds)
                                    for a in node.args]
    return SplitStep(split, pieces, sources)


def _is_step_input(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "placeholder" and \
        isinstance(_value(node), torch.Tensor) and not isinstance(_value(node), torch.nn.Parameter)


def _hoist_input_views(split: torch.fx.GraphModule, kinds: dict[str, str]) -> set[torch.fx.Node]:
    """A view of a step input with constant arguments (a layer's slice of the KV cache,
    `k_caches[i]`) is taken by the split step and handed to the graph piece, instead of
    inside the piece. The pieces of identical layers are then one graph, and one artifact
    serves them all, as vLLM compiles identical layers once; the view still aliases the
    step input, so a piece that writes through it writes the input. Returns the views."""
    views: set[torch.fx.Node] = set()
    for call in [n for n in split.graph.nodes if n.op == "call_module"]:
        if kinds[call.target] != "graph":
            continue
        sub = getattr(split, call.target)
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        outer = dict(zip(placeholders, call.args, strict=True))
        for node in list(sub.graph.nodes):
            tensors = node.all_input_nodes
            if not (_is_view(node) and tensors and all(
                    t in outer and (_is_step_input(outer[t]) or outer[t] in views)
                    for t in tensors)):
                continue
            with split.graph.inserting_before(call):
                view = split.graph.create_node(
                    node.op, node.target, *torch.fx.map_arg((node.args, node.kwargs),
                                                            outer.__getitem__))
            view.meta = dict(node.meta)
            with sub.graph.inserting_after(placeholders[-1]):
                placeholder = sub.graph.placeholder(f"{node.name}_input")
            placeholder.meta = dict(node.meta)
            node.replace_all_uses_with(placeholder)
            sub.graph.erase_node(node)
            placeholders.append(placeholder)
            outer[placeholder] = view
            views.add(view)
        kept = [ph for ph in placeholders if ph.users]
        for ph in placeholders:
            if not ph.users:
                sub.graph.erase_node(ph)
        call.args = tuple(outer[ph] for ph in kept)
        sub.recompile()
    split.recompile()
    return views


def _drop_unused_sizes(split: torch.fx.GraphModule) -> None:
    """split_module hands every submodule the size symbols of its tensors' shapes; the
    pieces read their sizes off their tensors instead, so those inputs go."""
    for call in [n for n in split.graph.nodes if n.op == "call_module"]:
        sub = getattr(split, call.target)
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        keep = [not (isinstance(call.args[i], torch.fx.Node) and call.args[i].op ==
                     "placeholder" and isinstance(_value(call.args[i]), torch.SymInt)
                     and not ph.users) for i, ph in enumerate(placeholders)]
        for ph, kept in zip(placeholders, keep, strict=True):
            if not kept:
                sub.graph.erase_node(ph)
        call.args = tuple(a for a, kept in zip(call.args, keep, strict=True) if kept)
        sub.recompile()
    split.recompile()


def _source(arg: Any, kinds: dict[str, str]) -> str:
    if not isinstance(arg, torch.fx.Node):
        return "constant"
    producer = arg.args[0] if arg.target is operator.getitem else arg
    if producer.op == "call_module":
        return kinds[producer.target]
    if producer.op == "placeholder":
        value = _value(producer)
        return "weight" if isinstance(value, torch.nn.Parameter) else "input"
    return "eager"
