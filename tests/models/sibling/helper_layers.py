"""A module next to the model file, imported by it without PYTHONPATH."""

import torch


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2
