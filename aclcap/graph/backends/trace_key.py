"""A warm capture without torch.export: the AOTI cache's second key, taken from the Dynamo
graphs the trace compiled anyway, and the index it names (which artifact serves which
size range). Exporting only to compute the program key cost about a tenth of a warm run.

Sound where the export is a function of what is hashed here: every graph Dynamo compiled
over the capture sizes (its code, the shape, stride and dtype of every node, the shape
guards and ranges its trace assumed), the values of every tensor a graph reads besides the
step's inputs (weights, buffers, constants), the inputs' and outputs' structure, the
sizes, and what program_key hashes beside the program (torch, aclcap, the CPU's ISA, the
op libraries, the options). Python that runs outside every graph is not seen, so a step
with a graph break or a skipped frame is keyed by export as before (`trace_key` returns
None), and so is a capture of size 1 alone (export traces size 2 there, which Dynamo
never saw). Not seen either: a branch on `torch.compiler.is_exporting()` (Dynamo and
export take different sides) and the Python a `python.module` op library imports beyond
its own file (a composite op's body there)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

import torch

from aclcap._tensors import raw_bytes
from aclcap.cache_budget import touch
from aclcap.graph.compiles import CompileLog, LoggedGraph
from aclcap.graph.export import SizeRange

INDEX_SUFFIX = ".ranges.json"


def _meta(value: object) -> str:
    """A node's value as the compiled code depends on it: shape, stride, dtype, device."""
    if isinstance(value, torch.Tensor):
        return f"T{list(value.shape)}{list(value.stride())}{value.dtype}{value.device}"
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_meta(v) for v in value) + ")"
    return type(value).__name__ if value is None or isinstance(value, torch.SymInt) \
        else repr(value)


def tensor_digest(t: torch.Tensor) -> str:
    data = raw_bytes(t.cpu())
    return hashlib.sha256(data.numpy().tobytes()).hexdigest()


def _graph_parts(graph: LoggedGraph, digest: dict[int, str]) -> list[str]:
    gm = graph.module
    parts, constants = [gm.code, *graph.shape_guards], []
    for node in gm.graph.nodes:
        parts.append(f"{node.name}:{_meta(node.meta.get('example_value'))}")
        if node.op == "get_attr":  # a constant Dynamo keeps on the module
            value = gm
            for attr in str(node.target).split("."):
                value = getattr(value, attr)
            if isinstance(value, torch.Tensor):
                constants.append(value)
    for t in [*graph.state, *constants]:
        if id(t) not in digest:
            digest[id(t)] = f"{list(t.shape)}:{t.dtype}:{tensor_digest(t)}"
        parts.append(digest[id(t)])
    return parts


def trace_key(log: CompileLog, sizes: list[int], program_parts: list[str]) -> str | None:
    """The key of the exported programs the logged graphs determine, or None where they do
    not determine them (a graph break, a skipped frame, size 1 alone)."""
    if not log.compiles or max(sizes) < 2:
        return None
    if any(c.graphs != 1 or breaks for c, breaks in zip(log.compiles, log.breaks, strict=True)):
        return None
    h = hashlib.sha256()
    digest: dict[int, str] = {}
    parts = [*program_parts, repr(sorted(sizes))]
    for compile_, graphs, out_spec in zip(log.compiles, log.graphs, log.out_specs,
                                          strict=True):
        parts += [f"compile {compile_.size} {compile_.kind}", out_spec]
        parts += _graph_parts(graphs[0], digest)
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def index_path(cache_dir: Path, stem: str, key: str) -> Path:
    return cache_dir / f"{stem}-{key}{INDEX_SUFFIX}"


def read_index(path: Path) -> list[tuple[SizeRange, Path]] | None:
    """The size ranges an earlier run exported under this key and their artifacts, where
    every artifact is still there; None otherwise (the caller exports)."""
    try:
        entries = json.loads(path.read_text())["ranges"]
        ranges = [(SizeRange(e["lo"], e["hi"], None, tuple(e["lifted"]),
                             excluded=tuple(e.get("excluded", ())), why=e.get("why", "")),
                   path.parent / e["artifact"]) for e in entries]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not ranges or not all(a.is_file() for _, a in ranges):
        return None
    touch(path)
    return ranges


def write_index(path: Path, ranges: list[tuple[SizeRange, Path]]) -> None:
    """Atomically, as the artifacts are: a concurrent run never reads half an index."""
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps({"ranges": [
        {"lo": r.lo, "hi": r.hi, "artifact": artifact.name, "lifted": list(r.lifted),
         "excluded": list(r.excluded), **({"why": r.why} if r.why else {})}
        for r, artifact in ranges]}))
    with contextlib.suppress(OSError):
        partial.replace(path)
