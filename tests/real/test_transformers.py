"""transformers decoders as users bring them (tiny random configs, nothing downloaded):
captured whole at several sizes on fresh inputs, padded, and with a custom attention op
split out piecewise as vLLM does; one benched. The pinned release is the `real` extra of
pyproject.toml, which `make test` installs.

Each capture must pass and match eager. A regression here is what users of aclcap meet
first: transformers reads a mask on the host only when not compiling, and that eager-only
read once failed every one of these models."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, aclcap

MODELS = ROOT / "tests" / "real" / "models"
ARCHITECTURES = ["llama", "qwen2", "qwen3", "mistral", "gemma", "phi3", "gpt2"]


def _capture(model: str, *extra: str) -> dict:
    run = aclcap("capture", str(MODELS / f"{model}.py"), "--shapes", "1,2,4", "--pad",
                 "--json", "-", *extra)
    assert run.code == 0, run.stdout + run.stderr
    doc = run.json()
    rows = doc["results"]
    assert [r["size"] for r in rows] == [1, 2, 3, 4]  # 3 runs padded to 4
    assert all(r["status"] == "pass" and r["fresh_inputs"] for r in rows), rows
    assert all(r["token_agreement"] == 1.0 for r in rows if r["padded_to"] is None), rows
    assert doc["host_reads"] == [] and doc["trace"]["graph_breaks"] == []
    return doc


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_decoder_captures_whole_padded_and_matches_eager(arch):
    doc = _capture(f"hf_{arch}")
    assert doc["mechanism"] == "aoti" and doc["trace"]["graph_count"] == 1


def test_custom_attention_op_is_in_the_graph_whole_and_split_out_piecewise():
    whole = _capture("hf_custom_attention")
    assert whole["trace"]["custom_ops_in_graph"] == ["corpus::attention"]
    split = _capture("hf_custom_attention", "--graph-mode", "piecewise")
    pieces = split["backend"]["piecewise"]
    assert pieces["split_on"] == ["corpus::attention"]
    assert [(p["kind"], p.get("op")) for p in pieces["pieces"]] == [
        ("graph", None), ("eager", "corpus::attention"), ("graph", None),
        ("eager", "corpus::attention"), ("graph", None)]  # one attention per layer


def test_bench_times_a_decoder_in_every_mode():
    run = aclcap("bench", str(MODELS / "hf_qwen2.py"), "--shapes", "2", "--rounds", "5",
                 "--min-time", "0.5", "--max-time", "2", "--json", "-")
    assert run.code == 0, run.stdout + run.stderr
    rows = run.json()["results"]
    assert [(r["mode"], r["mechanism"]) for r in rows] == [
        ("eager", "eager"), ("compiled", "inductor"), ("graph", "aoti")], rows
    assert all(r["step_median_us"] > 0 for r in rows)
