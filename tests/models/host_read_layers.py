"""Two layers that each read the same lengths on the host at one line (`.tolist()`), as
jetmoe's experts do in every layer: capture prints that read once, with its count."""

import torch
from host_read import make_inputs  # noqa: F401  (the same lengths, drawn fresh)


class Layer(torch.nn.Module):
    def forward(self, x, lengths):
        sizes = lengths.tolist()
        return torch.cat([p * 2 for p in torch.split(x, sizes)])


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(), Layer()])

    def forward(self, x, lengths):
        for layer in self.layers:
            x = layer(x, lengths)
        return x


def build_model(device, dtype):
    return TwoLayers()

