"""A step as vLLM's attention metadata carries it: `query_start_loc`, the offsets of each
request's tokens, one longer than the requests (`size + 1`), beside the tokens
themselves; and two edge weights per token in one flat list (`2 * size`), as a graph
step's edge list is. --pad repeats the last offset (padded requests hold no tokens, as
vLLM pads `query_start_loc`) and the last weight."""

import torch


class Step(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, query_start_loc, edge_weights):
        h = self.proj(x)
        counts = query_start_loc[1:] - query_start_loc[:-1]  # one token per request here
        weights = edge_weights.view(-1, 2).sum(-1)  # token i's edges: entries 2i and 2i + 1
        return h * counts.unsqueeze(-1).to(h.dtype) + weights.unsqueeze(-1)


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    x = torch.randn(size, 8, device=device, dtype=dtype)
    query_start_loc = torch.arange(size + 1, device=device, dtype=torch.int32)
    edge_weights = torch.randn(2 * size, device=device, dtype=dtype)
    return x, query_start_loc, edge_weights
