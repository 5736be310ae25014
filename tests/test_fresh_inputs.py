"""Replays must run on fresh inputs: a make_inputs seeded with the size returns the
capture's own values every call, and capture warns (tests/models/seeded_inputs.py)."""

from __future__ import annotations

import torch

from aclcap.capture.fresh import STALE_INPUTS, inputs_are_fresh
from tests.conftest import ROOT, aclcap

MODELS = ROOT / "tests" / "models"


def test_seeded_make_inputs_is_a_warning_not_a_failure(tmp_path):
    run = aclcap("capture", str(MODELS / "seeded_inputs.py"), "--device", "cpu", "--pad",
                 "--json", "-", ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 0, run.stderr  # the replays matched eager: only the proof is weaker
    rows = run.json()["results"]
    assert [(r["size"], r["status"]) for r in rows] == [(2, "pass"), (3, "pass"), (4, "pass")]
    for r in rows:
        assert r["fresh_inputs"] is False and r["warnings"] == [STALE_INPUTS]
    said = " ".join(run.stderr.split())
    assert f"warning: sizes 2, 3, 4: {STALE_INPUTS}" in said


def test_unseeded_make_inputs_is_fresh():
    run = aclcap("capture", str(MODELS / "env_outputs.py"), "--device", "cpu", "--json", "-")
    assert run.code == 0, run.stderr
    for r in run.json()["results"]:
        assert r["fresh_inputs"] is True and r["warnings"] == []
    assert "warning:" not in run.stderr


def test_inputs_differing_anywhere_are_fresh():
    calls = iter(range(10))

    def counter(size: int) -> tuple:  # the second input changes, the first never does
        return torch.zeros(size), torch.full((size,), float(next(calls)))

    assert inputs_are_fresh(counter(3), counter(3))
    same = lambda size: (torch.zeros(size), torch.ones(size, 2))  # noqa: E731
    assert not inputs_are_fresh(same(3), same(3))
