"""Host values beside tensors: a scale that changes every step, a block size that never
does (the same in every draw), and a per-token list of lengths (as long as the size)."""

import random

import torch


class Scaled(torch.nn.Module):
    def forward(self, x, scale, block, lengths):
        y = torch.ops.aten.mul.Scalar(x, scale)
        return y.view(-1, block).sum(1).view(x.shape[0], -1) + torch.tensor(
            lengths, dtype=x.dtype, device=x.device)[:, None]


def build_model(device, dtype):
    return Scaled()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype), random.uniform(0.5, 2.0), 4,
            [random.randint(1, 9) for _ in range(size)])
