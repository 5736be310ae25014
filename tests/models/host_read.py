"""A step that reads a tensor's values on the host (`.tolist()`) to feed an op's int[]
argument: a device capture refuses that sync, or freezes the lengths it read."""

import torch


class SplitByLengths(torch.nn.Module):
    def forward(self, x, lengths):
        sizes = lengths.tolist()
        parts = torch.split(x, sizes)
        return torch.cat([p.sum(0, keepdim=True) for p in parts])


def build_model(device, dtype):
    return SplitByLengths()


def make_inputs(size, device, dtype):
    first = int(torch.randint(0, size + 1, ()))
    return (torch.randn(size, 8, device=device, dtype=dtype),
            torch.tensor([first, size - first], device=device))
