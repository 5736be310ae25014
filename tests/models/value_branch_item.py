"""A step that branches on a tensor's values (item), not its size: needs torch.cond."""

import torch


class ValueBranch(torch.nn.Module):
    def forward(self, x):
        if x[0, 0].item() > 0:
            return x * 2
        return x - 1


def build_model(device, dtype):
    return ValueBranch()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
