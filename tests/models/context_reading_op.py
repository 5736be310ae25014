"""An op that reads vLLM-style forward context outside its arguments: make_inputs puts
each draw's row order on a module-level object (as vLLM's runner sets its forward context
before a step), and the kernel gathers `x`'s rows by it. Run beside another draw's
context (4 rows of order for a 1-row `x`), the kernel indexes past `x`'s end."""
import random
from dataclasses import dataclass, field

import torch


@dataclass
class ForwardContext:
    order: list[int] = field(default_factory=list)


CONTEXT = ForwardContext()


@torch.library.custom_op("ctxread::gather_rows", mutates_args=())
def gather_rows(x: torch.Tensor) -> torch.Tensor:
    order = CONTEXT.order
    torch._check(len(order) == x.shape[0], lambda: "context of another step")
    return x[torch.tensor(order, dtype=torch.long)] * 2


@gather_rows.register_fake
def _(x):
    return torch.empty_like(x)


class Step(torch.nn.Module):
    def forward(self, x):
        return gather_rows(x + 1)


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    CONTEXT.order = random.sample(range(size), size)
    return (torch.randn(size, 8, device=device, dtype=dtype),)
