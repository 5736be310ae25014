"""A decode step's most common pattern (issue 50): a constant sampling temperature, a host
float that is the same in every draw, beside an op that takes a list argument
(`.view(-1, 4, 4)`). Nothing custom: the float is frozen into the graph as a constant, and
capture notes it and passes."""

import torch

TEMPERATURE = 0.8


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x, temperature):
        h = self.lin(x).view(-1, 4, 4).softmax(-1)
        return (h.reshape(-1, 16) / temperature,)


def build_model(device, dtype):
    return Step().to(device, dtype)


def make_inputs(size, device, dtype):
    return torch.randn(size, 16, device=device, dtype=dtype), TEMPERATURE
