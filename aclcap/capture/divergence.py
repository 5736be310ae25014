"""--bisect: which layer a mismatch comes from, and the first node of the traced graph whose
compiled output diverges from eager. The whole step is compiled first with aot_eager
(tracing, functionalization, no code generation) and with inductor (the compiler the capture
mechanisms replay), both with dynamic shapes as capture traces them: a mismatch neither shows
comes from the capture mechanism; one aot_eager shows comes from tracing (a fake, a
mutation); one only inductor shows, from its code. Then the graph (torch.export) runs node
by node in eager once, recording every value, and prefixes of the graph ending at a node
are compiled with the first backend that differs and compared with that node's eager value,
in a binary search. torch's accuracy minifier does this for whole repro scripts, not as a
callable; so here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
import torch.fx

from aclcap._compat import OpOverload, flat_codegen, reset_dynamo
from aclcap._tensors import clone_tensors
from aclcap.errors import first_line
from aclcap.graph.compare import compare
from aclcap.graph.export import export_step
from aclcap.graph.replay import against_eager
from aclcap.graph.step import StepContext

BACKENDS = ("aot_eager", "inductor")  # the layers a compiled step goes through, in order


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        self.values[n.name] = value.clone() if isinstance(value, torch.Tensor) else value
        return value


def _prefix(gm: torch.fx.GraphModule, node_name: str) -> torch.fx.GraphModule:
    """A GraphModule computing only what `node_name` needs, returning it."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        if n.op == "output":
            break
        env[n] = graph.node_copy(n, lambda x: env[x])
        if n.name == node_name:
            graph.output(env[n])
            break
    prefix = torch.fx.GraphModule(gm, graph)
    prefix.graph.eliminate_dead_code()
    prefix.recompile()
    return prefix


def _source(n: torch.fx.Node, model_file: Path) -> str:
    trace = n.meta.get("stack_trace") or ""
    sites = re.findall(r'File "([^"]+)", line (\d+)', trace)
    inside = [s for s in sites if Path(s[0]).name == model_file.name] or sites
    return f"{Path(inside[-1][0]).name}:{inside[-1][1]}" if inside else "unknown"


def _whole_step(step: StepContext, args: tuple, backend: str) -> str:
    """"" where the step compiled with `backend` (dynamic) matches eager, else why not."""
    reset_dynamo()
    compiled = torch.compile(step.model, backend=backend, dynamic=True)

    def run(got: tuple) -> tuple[Any, tuple]:
        with torch.no_grad():
            return compiled(*got), got

    try:
        result, _, _ = against_eager(step, args, run)
    except Exception as exc:
        return f"fails: {first_line(exc)}"
    return "" if result.ok else result.reasons[0]


def first_diverging_node(step: StepContext, args: tuple) -> dict[str, Any]:
    """The first diverging node as a dict (node, op, shape, source, max_abs_err, error),
    with `backends`: per compile backend, "" where the whole step matches eager, else why
    not."""
    backends = {b: _whole_step(step, args, b) for b in BACKENDS}
    differing = next((b for b in BACKENDS if backends[b]), None)
    if differing is None:
        return {"node": None, "backends": backends, "error": (
            "the whole step compiled with aot_eager and with inductor (dynamic) matches "
            "eager: the mismatch comes from the capture mechanism, not from compilation")}
    found = _bisect(step, args, differing)
    layer = ("tracing (aot_eager differs too: a fake impl, a mutation the schema hides)"
             if differing == "aot_eager" else "inductor's code (aot_eager matches eager)")
    return {**found, "backends": backends, "backend": differing, "layer": layer}


def _op_name(target: Any) -> str:
    """`aten.sub.Tensor` for an op; `operator.sub`, `torch.nn.functional.linear` for the
    Python callables a Dynamo graph calls."""
    if isinstance(target, OpOverload) or not hasattr(target, "__name__"):
        return str(target)
    module = (getattr(target, "__module__", None) or "").removeprefix("_")
    return f"{module}.{target.__name__}" if module else target.__name__


def _graph(step: StepContext, args: tuple) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The step's graph with flat positional inputs, and the inputs it runs on: torch.export's
    where it takes the step, else the one graph Dynamo traces (its inputs the call's tensors
    and the module's state, as Dynamo lifts them). vLLM's steps reach a weight through
    `.data`, which export refuses and Dynamo traces (issue 50: bisect stopped there)."""
    try:
        exported = export_step(step.model, args, step.dims)
    except Exception as export_failure:
        graphs: list[tuple[torch.fx.GraphModule, list[Any]]] = []

        def keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            graphs.append((gm, list(example_inputs)))
            return gm.forward

        reset_dynamo()
        try:
            with torch.no_grad():
                torch.compile(step.model, backend=keep, fullgraph=True)(*clone_tensors(list(args)))
        except Exception as exc:
            raise RuntimeError(f"torch.export failed ({first_line(export_failure)}) and "
                               f"torch.compile made no single graph ({first_line(exc)})") from exc
        finally:
            reset_dynamo()
        return graphs[0]
    gm = exported.module()
    flat_codegen(gm)  # flat positional inputs, no pytree specs
    gm.recompile()
    return gm, list(args)


def _bisect(step: StepContext, args: tuple, backend: str) -> dict[str, Any]:
    """The first node whose prefix, compiled with `backend`, diverges from eager."""
    tol, model_file = step.tolerance, step.spec.path
    try:
        gm, inputs = _graph(step, args)
    except Exception as exc:
        return {"node": None, "error": f"cannot bisect: {first_line(exc)}"}
    recorder = _Recorder(gm)
    with torch.no_grad():
        recorder.run(*clone_tensors(inputs))
    candidates = [n for n in gm.graph.nodes if n.op == "call_function"
                  and isinstance(recorder.values.get(n.name), torch.Tensor)]

    def diverges(n: torch.fx.Node) -> tuple[bool, float, str | None]:
        reset_dynamo()
        try:
            with torch.no_grad():
                got = torch.compile(_prefix(gm, n.name), backend=backend, dynamic=True)(
                    *clone_tensors(inputs))
        except Exception as exc:
            return True, float("nan"), first_line(exc)
        result = compare({"value": recorder.values[n.name]}, {"value": got}, tol)
        return not result.ok, result.max_abs_err, None

    lo, hi = 0, len(candidates) - 1
    last_bad, last_err, last_error = diverges(candidates[hi])
    if not last_bad:
        return {"node": None, "error": f"the whole step compiled with {backend} differs, but "
                "no prefix of the graph bisected does: it is not the one torch.compile "
                "traced (see the backends above)"}
    while lo < hi:  # invariant: candidates[hi] diverges
        mid = (lo + hi) // 2
        bad, err, error = diverges(candidates[mid])
        if bad:
            hi, last_err, last_error = mid, err, error
        else:
            lo = mid + 1
    node = candidates[hi]
    value = recorder.values[node.name]
    return {"node": node.name, "op": _op_name(node.target), "shape": list(value.shape),
            "source": _source(node, model_file), "max_abs_err": last_err, "error": last_error}
