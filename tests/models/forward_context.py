"""vLLM's forward-context pattern: make_inputs sets the step's attention metadata
(`seq_lens`) on a module-level object, as set_forward_context does before a step, and the
step hands it to its attention op. It is none of make_inputs' inputs, so it is found by
comparing the op's host arguments over draws, each run with its own draw's context, and
named by where it lives (`CONTEXT.seq_lens`)."""
import random
from dataclasses import dataclass, field

import torch


@dataclass
class ForwardContext:
    seq_lens: list[int] = field(default_factory=list)


CONTEXT = ForwardContext()


@torch.library.custom_op("fctx::attend", mutates_args=())
def attend(x: torch.Tensor, seq_lens: list[int]) -> torch.Tensor:
    return torch.stack([x[i, :n].sum() for i, n in enumerate(seq_lens)])


@attend.register_fake
def _(x, seq_lens):
    return x.new_empty(x.shape[0])


class Step(torch.nn.Module):
    def forward(self, x):
        return attend(x * 2, CONTEXT.seq_lens)


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    CONTEXT.seq_lens = [random.randint(1, 16) for _ in range(size)]
    return (torch.randn(size, 16, device=device, dtype=dtype),)
