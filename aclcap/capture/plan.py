"""capture --plan-sizes: choose capture sizes under a graph budget. Ascend fits a limited
number of graphs (a stream budget of about 1800, spent at (layers + 1) per size), and a
batch size that misses the list pays for padding to the next size. With p(b) the share of
steps at batch size b, pick at most `budget` sizes, the largest being the max batch size,
that minimize the expected padded tokens sum_b p(b) * (next size >= b  -  b)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from aclcap.errors import UsageError

ASCEND_STREAMS = 1920  # vllm-ascend's MAX_CAPTURE_SIZE: streams for all captured graphs
COMM_DOMAIN_STREAMS = 40  # streams each communication domain holds back (FFTS+ unfolding)


def ascend_graph_budget(layers: int, comm_domains: int = 0, aiv: bool = False) -> int:
    """How many sizes fit the Ascend stream budget, by vllm-ascend's rule
    (vllm_ascend/utils.py, update_aclgraph_sizes): each graph costs layers + 1 streams, and
    each communication domain (TP, DP of size > 1) takes more. With HCCL's default
    unfolding (FFTS+ on A2, AICPU on A3):
        floor((1920 - 40 * domains) / (layers + 1) / (1 + 2 * domains))
    with HCCL_OP_EXPANSION_MODE=AIV (dense models), factor f = 1 + domains:
        floor((1920 - f * (layers + 1)) / (layers + 1) / f)"""
    if layers < 1 or comm_domains < 0:
        raise UsageError(f"--layers {layers} --comm-domains {comm_domains}: give layers >= 1 "
                         "and domains >= 0")
    per_graph = layers + 1
    if aiv:
        factor = 1 + comm_domains
        return max(0, (ASCEND_STREAMS - factor * per_graph) // per_graph // factor)
    return max(0, (ASCEND_STREAMS - COMM_DOMAIN_STREAMS * comm_domains) // per_graph
               // (1 + 2 * comm_domains))


def vllm_default_sizes(max_size: int) -> list[int]:
    """vLLM's default capture list (1, 2, 4, then every 8), cut at max_size."""
    sizes = [s for s in [1, 2, 4, *range(8, max_size + 1, 8)] if s <= max_size]
    return sizes if sizes and sizes[-1] == max_size else [*sizes, max_size]


def load_histogram(path: str) -> dict[int, float]:
    """JSON {"batch size": count} or text lines `size count`."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError as exc:
        raise UsageError(f"--sizes-histogram {path}: file not found") from exc
    try:
        raw = json.loads(text)
        pairs = [(int(k), float(v)) for k, v in raw.items()]
    except (json.JSONDecodeError, AttributeError, ValueError):
        try:
            pairs = [(int(a), float(b)) for a, b in
                     (line.split()[:2] for line in text.splitlines() if line.strip()
                      and not line.startswith("#"))]
        except ValueError as exc:
            raise UsageError(f"--sizes-histogram {path}: give JSON {{\"size\": count}} or "
                             "lines `size count`") from exc
    hist = {s: c for s, c in pairs if c > 0}
    if not hist or min(hist) < 1:
        raise UsageError(f"--sizes-histogram {path}: needs positive sizes with positive counts")
    return hist


def expected_waste(sizes: list[int], weights: dict[int, float]) -> float:
    """Expected padded tokens per step; a batch larger than every size is infinite waste."""
    total = sum(weights.values())
    ordered = sorted(sizes)
    waste = 0.0
    for b, w in weights.items():
        target = next((s for s in ordered if s >= b), None)
        if target is None:
            return float("inf")
        waste += w * (target - b)
    return waste / total


def plan_sizes(weights: dict[int, float], budget: int) -> list[int]:
    """The optimal list by dynamic programming over the sorted sizes (O(budget * M^2),
    vectorized over the previous size)."""
    if budget < 1:
        raise UsageError(f"--budget {budget}: at least one graph")
    top = max(weights)
    w = torch.zeros(top + 1, dtype=torch.float64)
    for b, c in weights.items():
        w[b] = c
    x = torch.arange(top + 1, dtype=torch.float64)
    W, X = w.cumsum(0), (w * x).cumsum(0)  # prefix sums: cost(a, b] = b*W(a,b] - X(a,b]
    inf = torch.tensor(float("inf"), dtype=torch.float64)
    # best[b] = least waste covering 1..b with the last size exactly b
    best = torch.where(torch.arange(top + 1) > 0, x * W - X, inf)
    choice = [dict.fromkeys(range(top + 1), 0)]
    for _ in range(1, min(budget, top)):
        nxt = best.clone()
        pick = dict.fromkeys(range(top + 1), -1)
        for b in range(2, top + 1):
            a = torch.arange(1, b)
            cost = best[1:b] + b * (W[b] - W[a]) - (X[b] - X[a])
            i = int(cost.argmin())
            if cost[i] < nxt[b]:
                nxt[b], pick[b] = cost[i], int(a[i])
        best = nxt
        choice.append(pick)
    sizes, b = [top], top
    for pick in reversed(choice[1:]):
        if pick[b] > 0:
            b = pick[b]
            sizes.append(b)
    return sorted(sizes)


def make_plan(budget: int, histogram: str | None, max_size: int) -> dict:
    """The sizes for `budget` graphs over the batch sizes of `histogram` (uniform up to
    `max_size` without one), and vLLM's default list over the same sizes for comparison."""
    weights = load_histogram(histogram) if histogram else \
        {b: 1.0 for b in range(1, max_size + 1)}
    chosen = plan_sizes(weights, budget)
    default = vllm_default_sizes(max(weights))
    return {"budget": budget, "distribution": histogram or f"uniform 1..{max_size}",
            "sizes": chosen, "expected_waste": expected_waste(chosen, weights),
            "vllm_default_sizes": default,
            "vllm_default_waste": expected_waste(default, weights)}
