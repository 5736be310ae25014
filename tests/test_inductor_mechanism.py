"""The cpu mechanism for steps torch.export cannot take (issue 48): Dynamo's graph compiled by
Inductor, as vLLM's graph mode compiles it, named `inductor` in every table and document;
state a step reads from another module's global (vLLM's forward context) taken per draw;
a model file's pad_inputs; and constants that hold a process's pointers never reused."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from tests.conftest import ROOT, aclcap

MODELS = ROOT / "tests" / "models"


@pytest.mark.parametrize("mode", ["full", "piecewise"])
def test_a_step_export_cannot_take_is_compiled_by_inductor_and_padded_by_its_hook(mode):
    split = ("--split-ops", "weight_data::scaled") if mode == "piecewise" else ()
    run = aclcap("capture", str(MODELS / "weight_data.py"), "--shapes", "2,4", "--pad",
                 "--graph-mode", mode, *split, "--json", "-")
    assert run.code == 0, run.stdout + run.stderr
    doc = run.json()
    rows = doc["results"]
    assert [(r["size"], r["padded_to"], r["status"]) for r in rows] == [
        (2, None, "pass"), (3, 4, "pass"), (4, None, "pass")]
    assert {r["mechanism"] for r in rows} == {doc["mechanism"]}
    if mode == "full":
        assert doc["mechanism"] == "inductor"
        why = doc["backend"]["export_failed"]
        assert "(Norm) at weight_data.py:" in why and "self.weight.data" in why
        assert "torch.cond" not in why  # the step has no branch
    else:  # the piece holding `.data` could not be exported either
        assert doc["mechanism"] == "inductor-piecewise"
        assert all("torch.export failed" in a["why"]
                   for a in doc["backend"]["piecewise"]["artifacts"])


def test_a_global_of_another_module_a_draw_rebinds_is_its_state():
    """vLLM's runner rebinds `vllm.forward_context._forward_context` before each step: a
    draw's context must come back with that draw, named where it lives."""
    from aclcap.draw_state import drawn, restore, sets_state

    holder = types.ModuleType("aclcap_test_holder")
    holder.CONTEXT = None
    sys.modules[holder.__name__] = holder
    try:
        def draw(value):
            holder.CONTEXT = {"value": value}
            return (torch.ones(1) * value,)

        first = drawn(lambda: draw(1), {})
        second = drawn(lambda: draw(2), {})
        assert sets_state(first) and holder.CONTEXT == {"value": 2}
        restore(first)
        assert holder.CONTEXT == {"value": 1}
        restore(second)
        assert holder.CONTEXT == {"value": 2}
    finally:
        del sys.modules[holder.__name__]


def test_a_constant_holding_a_pointer_is_named_process_local():
    """vLLM's CPU linears keep a oneDNN handle's address in an int64 tensor a closure holds:
    baked into an AOTI artifact and reused by another process, it crashed a warm run."""
    from aclcap.graph.backends.aoti import process_local

    handle, small = torch.tensor(0x7F00_1234_5678), torch.tensor(3)

    class Step(torch.nn.Module):
        def forward(self, x):
            return x + (handle * 0).float() + small.float()

    exported = torch.export.export(Step(), (torch.randn(4, 2),))
    found = process_local(exported)
    assert len(found) == 1 and exported.constants[found[0]].item() == 0x7F00_1234_5678


def test_a_step_passing_an_opaque_value_is_compiled_by_inductor_and_says_which():
    """vLLM's LayerName without vLLM: torch.export takes the step, the opaque value is read
    off the exported graph and named by its op's schema, and no AOTI compile is tried."""
    run = aclcap("capture", str(MODELS / "opaque_layer_name.py"), "--json", "-")
    assert run.code == 0, run.stdout + run.stderr
    doc = run.json()
    assert doc["mechanism"] == "inductor"
    assert [(r["size"], r["status"]) for r in doc["results"]] == [(1, "pass"), (4, "pass")]
    assert "export_failed" not in doc["backend"]  # torch.export took the step
    assert "LayerName (argument 2, `layer`, of opaque_layer::scaled)" in \
        doc["backend"]["aoti_refused"]
