"""Input dims affine in the size: vLLM's `query_start_loc` (`size + 1` offsets) and a flat
edge list (`2 * size`) are found with their rule, exported with a derived dim, padded by
repeating the last entry, and captured like any size dim; other growth is bad input."""

from __future__ import annotations

import pytest
import torch

from aclcap.errors import UsageError
from tests.conftest import ROOT, aclcap

OFFSETS = ROOT / "tests" / "models" / "offsets_step.py"


def _probe(path):
    from aclcap.loading.model_file import load_model_file, probe_inputs

    return probe_inputs(load_model_file(path), "cpu", torch.float32)[0]


def test_offsets_and_edge_lists_are_size_dims_with_their_rule():
    x, offsets, edges = _probe(OFFSETS)
    assert [(d, d.scale, d.offset) for d in x] == [(0, 1, 0)]
    assert [(d, d.scale, d.offset) for d in offsets] == [(0, 1, 1)]
    assert [(d, d.scale, d.offset) for d in edges] == [(0, 2, 0)]


def test_padding_repeats_the_last_offset_and_cuts_back_by_the_rule():
    from aclcap.graph.padding import pad_to, unpad
    from aclcap.size_dims import SizeDim

    dims = [[SizeDim(0)], [SizeDim(0, 1, 1)], [SizeDim(0, 2, 0)], [SizeDim(0, 1, 1)]]
    args = (torch.arange(3.0), torch.tensor([0, 1, 2, 3]), torch.arange(6.0), [0, 1, 2, 3])
    padded = pad_to(args, dims, 3, 5)
    assert padded[1].tolist() == [0, 1, 2, 3, 3, 3]  # two empty requests
    assert padded[2].tolist() == [0, 1, 2, 3, 4, 5, 5, 5, 5, 5]
    assert padded[3] == [0, 1, 2, 3, 3, 3]
    back = unpad(padded, dims, 3)
    assert all(torch.equal(a, b) for a, b in zip(back[:3], args[:3], strict=True))
    assert back[3] == args[3]


def test_a_step_with_offsets_captures_and_passes_with_and_without_pad():
    run = aclcap("capture", str(OFFSETS), "--shapes", "1,2,4", "--pad", "--json", "-")
    assert run.code == 0, run.stdout + run.stderr
    rows = run.json()["results"]
    assert [(r["size"], r["status"]) for r in rows] == [
        (1, "pass"), (2, "pass"), (3, "pass"), (4, "pass")]


def test_a_dim_that_grows_otherwise_is_bad_input_naming_its_lengths(tmp_path):
    bad = tmp_path / "square.py"
    bad.write_text("import torch\ndef build_model(d, t): return torch.nn.Identity()\n"
                   "def make_inputs(s, d, t): return (torch.ones(s * s),)\n")
    with pytest.raises(UsageError, match=r"input 0 dim 0 of make_inputs grows with size, but "
                       r"not as a \* size \+ b \(lengths 9, 16, 25 at sizes 3, 4, 5\)"):
        _probe(bad)
