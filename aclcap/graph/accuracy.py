"""Accuracy the way serving teams judge it, for models whose output is logits: greedy token
agreement and logprob error, with vllm-ascend's published tolerance (logprob atol 0.0689 on
the first token, twice that on later ones; when greedy tokens differ, eager's token must be
within the graph's top-20)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

LOGPROB_ATOL = 0.0689
TOP_K = 20


@dataclass
class LogprobResult:
    token_agreement: float  # share of positions whose greedy token matches eager's
    max_logprob_err: float  # |logprob of eager's token|, graph vs eager, over positions
    reasons: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons


def logprob_check(eager: torch.Tensor, graph: torch.Tensor, atol: float = LOGPROB_ATOL,
                  top_k: int = TOP_K) -> LogprobResult:
    """Compare [tokens, vocab] logits; position 0 is the first token, the rest are later."""
    e = torch.log_softmax(eager.detach().double().cpu().reshape(-1, eager.shape[-1]), dim=-1)
    g = torch.log_softmax(graph.detach().double().cpu().reshape(-1, graph.shape[-1]), dim=-1)
    want, got = e.argmax(-1), g.argmax(-1)
    rows = torch.arange(len(want))
    err = (g[rows, want] - e[rows, want]).abs()
    reasons = []
    for t in range(len(want)):
        tol = atol if t == 0 else 2 * atol
        if err[t] > tol:
            reasons.append(f"token {t}: logprob of eager's token {int(want[t])} differs by "
                           f"{float(err[t]):.3g} > {tol:.4g}")
        if want[t] != got[t] and want[t] not in g[t].topk(min(top_k, g.shape[-1])).indices:
            reasons.append(f"token {t}: eager's token {int(want[t])} is not in the graph's "
                           f"top-{top_k} (graph picked {int(got[t])})")
    return LogprobResult(float((want == got).double().mean()), float(err.max()), reasons)
