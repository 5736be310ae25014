"""Piecewise fixture: one decorator's wrapper (as transformers' deprecation decorator)
serves two functions, and each graph-breaks inside, so Dynamo compiles the wrapper's frame
on its own: one code object for two callers with other keyword arguments. Run without
guards, the first caller's compile ran for the second (issue 50: jetmoe's `KeyError:
'input_ids'`, exit 3)."""

import functools

import torch

SPLITTING_OPS = ["pw_wrap::attend"]
SHAPES = [2, 4]


def deprecated(func):
    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapped


@deprecated
def scale(x, *, by):
    torch._dynamo.graph_break()
    return x * by


@deprecated
def shift(x, *, to, also):
    torch._dynamo.graph_break()
    return x + to - also


@torch.library.custom_op("pw_wrap::attend", mutates_args=())
def attend(x: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    return x * seq_lens[:, None].to(x.dtype)


@attend.register_fake
def _(x, seq_lens):
    return torch.empty_like(x)


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, seq_lens):
        h = scale(self.lin(x), by=2.0)
        h = attend(h, seq_lens)
        return shift(self.lin(h), to=1.0, also=0.5)


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),
            torch.randint(1, 9, (size,), device=device))
