"""The AOTI cache's trace key: what a warm capture looks its size ranges up by instead of
exporting. It must follow everything the exported program depends on and refuse the
steps whose graphs do not determine it."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
from torch import nn
from torch.export import Dim

from aclcap.graph.backends.trace_key import trace_key
from aclcap.graph.compiles import CompileLog, compile_over_sizes
from tests.conftest import ROOT

SIZES = [2, 4]
ENV = ["torch", "aclcap", "the libraries", "the options"]  # program_key's other parts


class Step(nn.Module):
    def __init__(self, scale: float = 2.0, breaks: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(8, 8)
        self.scale, self.breaks = scale, breaks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x) * self.scale
        if self.breaks:
            torch._dynamo.graph_break()
        return y.relu()


def _key(model: nn.Module, sizes: list[int] = SIZES, width: int = 8) -> str | None:
    log = CompileLog("eager")
    order = sorted(sizes, reverse=True)
    compile_over_sizes(model, ((s, (torch.randn(s, width),)) for s in order), [[0]], log)
    return trace_key(log, sizes, ENV)


def test_same_step_same_key_across_fresh_traces():
    assert _key(Step()) == _key(Step()) is not None


def test_key_follows_weights_constants_sizes_and_environment():
    base = _key(Step())
    changed = Step()
    with torch.no_grad():
        changed.proj.weight[0, 0] += 1  # AOTI bakes the weights in
    assert _key(changed) != base
    assert _key(Step(scale=3.0)) != base  # a Python constant the graph's code holds
    assert _key(Step(), sizes=[2, 4, 8]) != base
    log = CompileLog("eager")
    compile_over_sizes(Step(), ((s, (torch.randn(s, 8),)) for s in (4, 2)), [[0]], log)
    assert trace_key(log, SIZES, [*ENV[:-1], "max_autotune"]) != base


def test_key_follows_input_shapes_the_code_does_not_name():
    # Same code and same weights; only the input's width differs, which no line names.
    class Sliced(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.sum(-1)

    assert _key(Sliced(), width=8) != _key(Sliced(), width=16)


class BreaksFirst(nn.Module):
    """A break before any op: Dynamo compiles no empty graph, so the call has one graph
    while Python (here the break; in a model, code export would trace) ran outside it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._dynamo.graph_break()
        return x.relu()


def test_no_key_where_the_graphs_do_not_determine_the_export():
    assert _key(Step(breaks=True)) is None  # Python between graphs is not hashed
    assert _key(BreaksFirst()) is None
    assert _key(Step(), sizes=[1]) is None  # export traces size 2, which Dynamo never saw
    assert trace_key(CompileLog("eager"), SIZES, ENV) is None  # nothing traced


def test_cpu_capability_enters_the_key_environment():
    """An artifact compiled for one vector ISA is never looked up on another: the loader
    skips torch's ISA probe, so the key has to carry it."""
    code = ("from aclcap.graph.backends.aoti import _environment\n"
            "from aclcap.loading.model_file import load_model_file\n"
            "print(_environment(load_model_file('examples/one_linear.py'), {})[2])")
    seen = []
    for isa in ("default", "avx2"):
        env = {**os.environ, "ATEN_CPU_CAPABILITY": isa, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                             capture_output=True, check=True).stdout
        seen.append(out.strip().splitlines()[-1])
    assert seen == ["DEFAULT", "AVX2"]


def test_program_key_follows_a_custom_ops_meta_not_its_kernel():
    """The artifact calls a custom op's kernel by name when it runs: a rebuilt kernel with
    the same meta reuses it (a kernel author's edit costs no compile), a changed meta not."""
    from aclcap.graph.backends.aoti import program_key

    schema = torch.library.Library("aclcap_keytest", "DEF")  # held: it goes when collected
    schema.define("twice(Tensor x) -> Tensor")

    class CallsIt(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.aclcap_keytest.twice(x) + 1

    def key_with(kernel, meta) -> str:
        impl = torch.library.Library("aclcap_keytest", "IMPL")
        impl.impl("twice", kernel, "CPU")
        impl.impl("twice", meta, "Meta")
        try:
            return program_key(torch.export.export(CallsIt(), (torch.randn(4, 8),),
                                                   dynamic_shapes=({0: Dim("t")},)))
        finally:
            impl._destroy()

    base = key_with(lambda x: x * 2, torch.empty_like)
    assert key_with(lambda x: x + x, torch.empty_like) == base
    column_major = key_with(lambda x: x * 2, lambda x: x.new_empty(x.shape[::-1]).t())
    assert column_major != base
    schema._destroy()
