"""Replay stability and serving-style accuracy (logprobs, greedy tokens) on known inputs."""

from __future__ import annotations

import math

import torch

from aclcap.capture.run import REPLAYS, _replay_row
from aclcap.graph.accuracy import LOGPROB_ATOL, logprob_check
from aclcap.graph.backends.base import Captured
from aclcap.graph.options import StepOptions
from aclcap.graph.step import prepare_step
from tests.conftest import ROOT


def test_identical_logits_pass():
    logits = torch.randn(3, 50)
    result = logprob_check(logits, logits.clone())
    assert result.ok and result.token_agreement == 1.0 and result.max_logprob_err == 0.0


def test_known_logprob_error_on_first_and_later_tokens():
    eager = torch.zeros(2, 4)
    eager[:, 0] = 2.0  # token 0 wins in both rows
    graph = eager.clone()
    graph[0, 0] += 0.3  # raises token 0's logprob by a known amount, in both rows
    graph[1, 0] += 0.3
    lp = torch.log_softmax(eager[0].double(), -1)[0]
    expected = (torch.log_softmax(graph[0].double(), -1)[0] - lp).abs().item()
    assert LOGPROB_ATOL < expected < 2 * LOGPROB_ATOL  # fails on the first token only
    result = logprob_check(eager, graph)
    assert math.isclose(result.max_logprob_err, expected, rel_tol=1e-9)
    assert result.reasons == [f"token 0: logprob of eager's token 0 differs by {expected:.3g} "
                              f"> {LOGPROB_ATOL:.4g}"]


def test_differing_token_must_be_in_top_20():
    eager = torch.arange(30.0).repeat(1, 1)  # eager picks token 29
    graph = eager.clone()
    graph[0, 0] = 100.0  # graph picks token 0; eager's 29 is still in its top-20
    result = logprob_check(eager, graph)
    assert result.token_agreement == 0.0
    assert not any("top-20" in r for r in result.reasons)
    graph[0, 1:25] = 99.0  # now 24 tokens beat 29 in the graph
    assert any("not in the graph's top-20" in r for r in logprob_check(eager, graph).reasons)


class _FirstReplayStale:
    """A replay that returns stale output the first time (as a graph whose static buffers
    were not refreshed would), then the model's true output."""

    def __init__(self, model):
        self.model, self.calls = model, 0

    def __call__(self, args):
        self.calls += 1
        with torch.no_grad():
            out = self.model(*args)
        return out + 1.0 if self.calls == 1 else out


def test_double_replay_names_a_stale_first_replay():
    step = prepare_step(StepOptions(model=str(ROOT / "tests" / "models" / "diverging.py"),
                                    device="cpu"))
    replay = _FirstReplayStale(step.model)
    cap = Captured(2, 1.0, 0, replay)
    row = _replay_row(step, cap, "aoti")
    assert replay.calls == REPLAYS == row.replays
    assert row.status == "fail"
    assert row.reasons[0] == "the first replay differs from eager, later ones match"
    assert row.reasons[1].startswith("replay 1: output 0 differs from eager")
