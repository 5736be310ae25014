"""One runnable advice for a step's custom ops without a fake impl, however the step met
them (Dynamo's trace breaking or failing, torch.export, Inductor): every such op of the step
named, and the two commands that close the loop, with the user's own paths: synthesize their
fakes from the kernels' real calls in this step, then capture with them. And what a graph
break costs under vLLM's rule: vLLM compiles with `fullgraph=True`, so a break anywhere in
the step stops its compile, in piecewise mode too (its split comes after a whole trace)."""

from __future__ import annotations

import linecache
import os
from pathlib import Path


def as_typed(path: str) -> str:
    """A path as the user can paste it from where they ran: relative to the working folder
    where it lies below it, else absolute (issue 50: `m_decode.py` lost its `models/`)."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def fakes_file(ops: list[str]) -> str:
    """Where the advice writes the fakes: `<namespaces>_fakes.py` in the working folder."""
    spaces = dict.fromkeys(op.split("::", 1)[0] for op in ops)
    return "_".join(spaces) + "_fakes.py"


def fakes_advice(model: str, ops: list[str], graph_mode: str = "full") -> str:
    """The commands that write the fakes of `ops` (`ns::name`) from their calls in the step
    of `model` and capture with them, to paste as printed."""
    spaces = " ".join(f"--namespace {ns}" for ns in dict.fromkeys(o.split("::")[0] for o in ops))
    out, typed = fakes_file(ops), as_typed(model)
    mode = " --graph-mode piecewise" if graph_mode == "piecewise" else ""
    return (f"{len(ops)} op(s) of the step have no fake impl ({', '.join(ops)}): write them "
            f"from their kernels' real calls with `aclcap check-meta --samples-from {typed} "
            f"{spaces} --synthesize {out}`, then `aclcap capture {typed}{mode} --fakes {out}`")


def code_at(file: str, line: int) -> str:
    """The source line, stripped ("" where it cannot be read)."""
    return linecache.getline(file, line).strip() if line else ""


def where(file: str, line: int) -> str:
    """`layers.py:20 (`return torch.ops.myacl.rms_norm(...)`)`."""
    code = code_at(file, line)
    return f"{Path(file).name}:{line}" + (f" (`{code}`)" if code else "")


ALLOW = ("--allow-breaks captures the graphs around the breaks (their rows say so; not what "
         "vLLM runs)")


def vllm_refuses(breaks: int) -> str:
    """Why a step with graph breaks fails every size under the default rule."""
    return (f"the step does not trace as one graph ({breaks} graph break(s)): vLLM compiles "
            f"it with fullgraph=True and would refuse it; {ALLOW}")


def breaks_allowed(breaks: int, outside: list[str]) -> str:
    """The warning of a row captured with --allow-breaks."""
    ops = f"; outside any graph: {', '.join(outside)}" if outside else ""
    return (f"--allow-breaks: {breaks} graph break(s), the code between the graphs runs "
            f"eagerly{ops}: vLLM (fullgraph=True) would refuse this step")
