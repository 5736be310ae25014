"""A recurrence over the tokens, as recurrent_gemma's scan: a Python loop as long as the
step's size. torch.export's range for it reads [1, oo] while its own guards hold at the
size it was exported at only: served size by size. The range export at 2 never covered 1,
and capture looped exporting it (recurrent_gemma: 33 minutes and no verdict). Its
positions are a view, `arange(...).unsqueeze(0)`, as transformers' are: piecewise, whose
Dynamo guards read a view's base, compiled again at replay on copies."""
import torch


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8) * 0.3)

    def forward(self, x, positions):
        h = torch.zeros(x.shape[-1], device=x.device, dtype=x.dtype)
        outs = []
        for t in range(x.shape[0]):
            h = torch.tanh(h @ self.w + x[t])
            outs.append(h)
        return torch.stack(outs) + positions.t().to(x.dtype) * 0.01


def build_model(device, dtype):
    return Step().to(device=device, dtype=dtype)


def make_inputs(size, device, dtype):
    start = int(torch.randint(0, 64, ()))
    return (torch.randn(size, 8, device=device, dtype=dtype),
            torch.arange(start, start + size, device=device).unsqueeze(0))


SHAPES = [1, 2, 4]
