"""A model's parameters and buffers named like torch.fx.GraphModule's own attributes
(`code`, `graph`, `meta`) capture and replay like any other state (tests/models/
graphmodule_names.py); `forward` needs no handling: nn.Module itself refuses state of that
name."""

from __future__ import annotations

import pytest
import torch

from aclcap.graph.export import export_step, exportable
from aclcap.loading.model_file import load_model_file
from tests.conftest import ROOT, aclcap

MODEL = ROOT / "tests" / "models" / "graphmodule_names.py"


def test_state_named_like_graph_module_attributes_captures_and_matches_eager(tmp_path):
    run = aclcap("capture", str(MODEL), "--device", "cpu", "--json", "-",
                 ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 0, run.stderr
    rows = run.json()["results"]
    assert [(r["size"], r["status"]) for r in rows] == [(1, "pass"), (2, "pass"), (4, "pass")]
    assert all(r["max_abs_err"] < 1e-4 and r["replays"] == 2 for r in rows)


def test_the_exported_program_unlifts_and_computes_the_model():
    spec = load_model_file(MODEL)
    model = spec.build_model(torch.device("cpu"), torch.float32)
    x = spec.make_inputs(3, torch.device("cpu"), torch.float32)
    program = export_step(model, x, [[0]])
    assert not any(n in program.state_dict for n in ("code", "graph", "meta", "proj.code"))
    # ExportedProgram.module() unlifts the state onto a GraphModule, as AOTInductor does
    unlifted = program.module()
    torch.testing.assert_close(unlifted(*x), model(*x))
    five = spec.make_inputs(5, torch.device("cpu"), torch.float32)  # the size stays dynamic
    torch.testing.assert_close(unlifted(*five), model(*five))


def test_other_models_export_as_written():
    plain = torch.nn.Linear(4, 4)
    assert exportable(plain) is plain
    assert "weight" in export_step(plain, (torch.randn(3, 4),), [[0]]).state_dict


def test_nn_module_refuses_state_named_forward():
    with pytest.raises(KeyError, match="attribute 'forward' already exists"):
        torch.nn.Module().register_buffer("forward", torch.zeros(1))
