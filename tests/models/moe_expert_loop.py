"""A MoE step with its own expert loop, as dbrx and qwen2_moe's eager experts run it: each
expert takes the tokens routed to it, found with `nonzero`, and is skipped where none is.
The number of tokens follows the router's values, so no graph holds the loop; capture must
name the op that made that size and its line, not only torch's `Eq(u0, 0)`. The experts
gather their tokens by an integer index, whose size is no data's."""
import torch


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(16, 4)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(4))

    def forward(self, x):
        chosen = self.router(x).argmax(-1)
        out = x[torch.arange(x.shape[0], device=x.device)] * 0
        for e, expert in enumerate(self.experts):
            tokens = (chosen == e).nonzero().squeeze(-1)
            if tokens.numel() == 0:
                continue
            out[tokens] += expert(x[tokens])
        return out


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    return (torch.randn(size, 16, device=device, dtype=dtype),)
