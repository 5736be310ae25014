"""capture --plan-sizes: the planner against a brute-force optimum, and its CLI."""

from __future__ import annotations

import itertools
import random

import pytest

from aclcap.capture.plan import expected_waste, load_histogram, plan_sizes, vllm_default_sizes
from aclcap.errors import UsageError
from tests.conftest import aclcap


def brute_force(weights: dict[int, float], budget: int) -> float:
    top = max(weights)
    return min(expected_waste([*extra, top], weights) for k in range(budget)
               for extra in itertools.combinations(range(1, top), k))


@pytest.mark.parametrize("seed", range(25))
def test_planner_matches_brute_force(seed):
    rng = random.Random(seed)
    top, budget = rng.randint(1, 11), rng.randint(1, 5)
    weights = {b: rng.random() for b in range(1, top + 1) if rng.random() < 0.8} or {top: 1.0}
    sizes = plan_sizes(weights, budget)
    assert len(sizes) <= budget and sizes == sorted(sizes) and sizes[-1] == max(weights)
    assert expected_waste(sizes, weights) == pytest.approx(brute_force(weights, budget))


def test_known_cases():
    assert plan_sizes({1: 1, 2: 1, 3: 1, 4: 1}, 4) == [1, 2, 3, 4]  # enough graphs: no waste
    assert plan_sizes({1: 10, 8: 1}, 2) == [1, 8]
    assert expected_waste([4], {1: 1, 4: 1}) == pytest.approx(1.5)
    assert expected_waste([2], {3: 1}) == float("inf")  # a batch no graph holds


def test_vllm_default_list():
    assert vllm_default_sizes(20) == [1, 2, 4, 8, 16, 20]
    assert vllm_default_sizes(32) == [1, 2, 4, 8, 16, 24, 32]


def test_histogram_formats(tmp_path):
    text = tmp_path / "h.txt"
    text.write_text("# size count\n1 5\n3 2\n")
    assert load_histogram(str(text)) == {1: 5.0, 3: 2.0}
    js = tmp_path / "h.json"
    js.write_text('{"2": 4, "8": 1}')
    assert load_histogram(str(js)) == {2: 4.0, 8: 1.0}
    bad = tmp_path / "bad.txt"
    bad.write_text("one two\n")
    with pytest.raises(UsageError, match="give JSON"):
        load_histogram(str(bad))


def test_cli_prints_plan_and_vllm_comparison(tmp_path):
    hist = tmp_path / "h.txt"
    hist.write_text("1 50\n2 30\n4 10\n7 5\n32 5\n")
    run = aclcap("capture", "--plan-sizes", "--budget", "3", "--sizes-histogram", str(hist),
                 "--json", "-")
    assert run.code == 0, run.stderr
    (doc,) = run.json()["results"]
    assert doc["sizes"] == plan_sizes(load_histogram(str(hist)), 3)
    assert doc["vllm_default_sizes"] == [1, 2, 4, 8, 16, 24, 32]
    assert "vLLM's default list (7 sizes, over the budget)" in run.stderr


def test_cli_needs_budget():
    run = aclcap("capture", "--plan-sizes")
    assert run.code == 2 and "--plan-sizes needs --budget GRAPHS" in run.stderr
