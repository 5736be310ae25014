"""Every compile torch.compile makes of one step across the capture sizes: which size
compiled, the guard that failed (verbatim, from Dynamo's own guard-failure record), the
model-file line that guard came from, its kind, and which input dims the new graph holds
dynamic. Compiles are counted with Dynamo's counters, never read from log text.

The size dims are marked dynamic up front (`torch._dynamo.mark_dynamic`), as vLLM marks
its token dim: without that, automatic dynamic compiles the first size static and the
second again. A size of 1 is left unmarked: Dynamo specializes 0/1 regardless, and that
recompile is reported, not hidden."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from aclcap._compat import (
    compile_backends,
    dynamo_counters,
    guard_failures,
    lookup_backend,
    mark_dynamic,
    pytree,
    reset_dynamo,
)
from aclcap.errors import UsageError

FIRST = "first_compile"
AUTOMATIC_DYNAMIC = "automatic_dynamic"
SPECIALIZATION = "0/1_specialization"
GUARD = "guard"
# Dynamo writes the user line of a guard as `# <abbreviated path>:<line> in <function>`.
_SITE = re.compile(r"#\s*(\S+?\.py):(\d+) in \w+")
# Guards on who called a frame, not on sizes: a library's shared wrapper (transformers'
# deprecation wrapper) is compiled again for each caller's type and arity, within one step.
_CALLER_GUARD = re.compile(r"___check_type_id|___check_obj_id|len\((args|kwargs)\)")


@dataclass
class LoggedGraph:
    """One graph Dynamo handed the backend, with what its code does not show: the real
    tensors it reads besides the call's inputs (weights, buffers, constants, in placeholder
    order) and the shape guards and ranges its trace assumed (the AOTI trace key hashes
    them; see aclcap.graph.backends.trace_key)."""

    module: torch.fx.GraphModule
    state: list[torch.Tensor]
    shape_guards: list[str]


@dataclass
class Compile:
    """One call that compiled: `reason` is the guard that failed (verbatim), or "first
    compile"; `graphs` how many graphs that call compiled (more than one: graph breaks)."""

    size: int
    kind: str
    reason: str
    file: str | None
    line: int | None
    code: str | None = None  # the model-file source the guard came from
    graphs: int = 1
    dynamic: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def guard(self) -> str:
        """The failed guard's expression, without Dynamo's comments."""
        return self.reason.split("  # ", 1)[0].split(": ", 1)[-1]

    def source(self) -> str:
        """Where the guard came from: "`if x.shape[0] > 4:` at model.py:16"."""
        code = f"`{self.code}` " if self.code else ""
        return f"{code}at {Path(self.file).name}:{self.line}" if self.file else ""

    def text(self) -> str:
        """One line: the size, the kind, the guard's expression and where it came from."""
        if self.kind == FIRST:
            dyn = ", ".join(f"{k}[{','.join(map(str, v))}]" for k, v in self.dynamic.items())
            return f"size {self.size}: first compile ({'dynamic ' + dyn if dyn else 'static'})"
        where = f" ({self.source()})" if self.file else ""
        return f"size {self.size}: recompiled, {self.kind.replace('_', ' ')}: {self.guard()}{where}"


def _is_caller_guard(reason: str) -> bool:
    return bool(_CALLER_GUARD.search(reason.split("  # ", 1)[0]))


def _kind(reason: str) -> str:
    if "0/1 specialization" in reason:
        return SPECIALIZATION
    if re.search(r"(size|stride) mismatch at index", reason):
        return AUTOMATIC_DYNAMIC
    return GUARD


def _site(reason: str, model_file: Path | None) -> tuple[str | None, int | None, str | None]:
    """The guard's file, line and user source; Dynamo abbreviates the path, so a suffix of
    the model file's path is taken for the model file."""
    match = _SITE.search(reason)
    if not match:
        return None, None, None
    file, line = match.group(1), int(match.group(2))
    if model_file is not None and str(model_file.resolve()).endswith(file):
        file = str(model_file)
    parts = reason.split("  # ")
    code = parts[1].strip() if len(parts) > 2 else None
    return file, line, code


def _dynamic_dims(gm: torch.fx.GraphModule) -> dict[str, list[int]]:
    dims = {}
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if node.op == "placeholder" and isinstance(value, torch.Tensor):
            dyn = [i for i, d in enumerate(value.shape) if isinstance(d, torch.SymInt)]
            if dyn:
                dims[re.sub(r"^l_|_$", "", node.name)] = dyn
    return dims


def resolve_compile_backend(name: str) -> Any:
    """A torch.compile backend by its registered name (`torch._dynamo.list_backends`, which
    includes those a plugin such as torch_npu registers) or as `module:function`."""
    if ":" in name:
        import importlib

        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"--compile-backend {name!r}: cannot import it ({exc}); give a "
                             "registered backend name or module:function") from exc
    known = compile_backends()
    if name not in known:
        raise UsageError(f"--compile-backend {name!r} is not a torch.compile backend; choose "
                         f"one of {', '.join(sorted(known))}, or module:function")
    return name


class CompileLog:
    """Wraps a torch.compile backend to see each graph it is given, and records the calls
    that compiled: pass `log.backend` to torch.compile and make calls through `log.call`."""

    def __init__(self, backend: Any, model_file: Path | None = None) -> None:
        self.named = backend  # looked up when Dynamo first hands it a graph (`backend`)
        self.runs_eagerly = backend == "eager"  # the graphs run as they are: no codegen
        self.model_file = model_file
        self.compiles: list[Compile] = []
        # Per compile, the graphs Dynamo handed the backend (what the trace reads its graph
        # count, breaks and ops from, instead of tracing again with torch._dynamo.explain),
        # the graph breaks Dynamo counted in the call (a break before any op compiles no
        # graph of its own) and the structure of what the call returned.
        self.graphs: list[list[LoggedGraph]] = []
        self.breaks: list[int] = []
        self.out_specs: list[str] = []
        # Why Dynamo broke the graph, each reason once over every call (its counters keep
        # no place): a data-dependent operator is a value the step reads on the host.
        self.break_reasons: list[str] = []
        self._graphs: list[tuple[LoggedGraph, dict[str, list[int]]]] = []
        self._args: list[Any] = []

    def reset(self) -> None:
        """Forget every compile: the step is traced again from the start."""
        self.compiles, self.graphs, self.breaks, self.out_specs = [], [], [], []
        self.break_reasons = []

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        user = {id(a) for a in self._args}
        state = [t for t in example_inputs if isinstance(t, torch.Tensor) and id(t) not in user]
        env = getattr(gm, "shape_env", None)
        guards = [str(g.expr) for g in env.guards] + \
            [f"{s} in {r}" for s, r in sorted(env.var_to_range.items(), key=str)] if env else []
        self._graphs.append((LoggedGraph(gm, state, guards), _dynamic_dims(gm)))
        inner = lookup_backend(self.named) if isinstance(self.named, str) \
            else self.named
        return inner(gm, example_inputs)

    def call(self, fn: Callable, size: int, args: tuple) -> Any:
        """Call `fn(*args)` at `size` and record a compile if it made one."""
        counters, failures = dynamo_counters(), guard_failures()
        seen = {code: len(reasons) for code, reasons in failures.items()}
        breaks = sum(counters["graph_break"].values())
        known = dict(counters["graph_break"])
        self._graphs, self._args = [], pytree.tree_leaves(args)
        try:
            out = fn(*args)
        finally:
            self._args = []
            self.break_reasons += [r for r, n in counters["graph_break"].items()
                                   if n > known.get(r, 0) and r not in self.break_reasons]
        if not self._graphs:
            return out
        new = [r for code, reasons in failures.items() for r in reasons[seen.get(code, 0):]]
        # The first call's failures are frames it entered again (another caller of a shared
        # frame): no earlier call compiled anything to fail. Later, the size's own guard
        # names the recompile, before any caller's guard.
        new = sorted(new, key=_is_caller_guard) if self.compiles else []
        reason = new[0] if new else "first compile"
        dynamic: dict[str, list[int]] = {}
        for _, dims in self._graphs:
            dynamic.update(dims)
        self.compiles.append(Compile(size, _kind(reason) if new else FIRST, reason,
                                     *_site(reason, self.model_file), graphs=len(self._graphs),
                                     dynamic=dynamic))
        self.graphs.append([graph for graph, _ in self._graphs])
        self.breaks.append(sum(counters["graph_break"].values()) - breaks)
        self.out_specs.append(str(pytree.tree_structure(out)))
        return out

    def recompiled(self) -> list[Compile]:
        """Compiles after the first: each entry is one call, one size."""
        return self.compiles[1:]

    def guards(self) -> list[Compile]:
        """Recompiles caused by a guard in the user's code (a branch on the size)."""
        return [c for c in self.compiles if c.kind == GUARD]


def mark_size_dims(args: tuple, dims: list[list[int]], size: int, maybe: bool = False
                   ) -> tuple:
    """Mark each input's size dims dynamic (sizes >= 2: Dynamo specializes 0 and 1). Where a
    host list's length is the size (`seq_lens`), the step's graph holds that length as a
    constant, so the size cannot be dynamic: it is only suggested (`maybe_mark_dynamic`)
    and Dynamo compiles per size, as a device graph is captured per size anyway. `maybe`
    suggests every size dim only: for a step that pins its own size (`if x.shape[0] == 8`),
    which a required dynamic dim refuses."""
    hosted = any(ds and not isinstance(a, torch.Tensor) for a, ds in zip(args, dims,
                                                                         strict=False))
    if size >= 2:
        for arg, ds in zip(args, dims, strict=False):
            for d in ds if isinstance(arg, torch.Tensor) else ():
                mark_dynamic(arg, d, maybe=hosted or maybe)
    return args


def compile_over_sizes(model: torch.nn.Module, inputs: Iterable[tuple[int, tuple]],
                       dims: list[list[int]], log: CompileLog, maybe: bool = False
                       ) -> list[Compile]:
    """Compile `model` over (size, inputs) in order with the backend's dynamic settings and
    return every compile (`maybe`: mark_size_dims'). Resets Dynamo first, so that no
    earlier guard is reused."""
    reset_dynamo()
    compiled = torch.compile(model, backend=log.backend)
    with torch.no_grad():
        for size, args in inputs:
            log.call(compiled, size, mark_size_dims(args, dims, size, maybe))
    reset_dynamo()
    return log.compiles
