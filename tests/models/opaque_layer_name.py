"""vLLM's attention-op pattern without vLLM: each layer passes its name to its op as a torch
opaque value type (vLLM's `LayerName`, torch >= 2.11). torch.export takes such a step, and
AOTInductor's C++ runner cannot take the value ("Unsupported input type as_custom_obj"):
capture must see it in the exported graph and compile with Inductor instead."""

import torch
from torch._library.opaque_object import register_opaque_type

SHAPES = [1, 4]


class LayerName:
    """A layer's name, hashed and compared by its text (as vLLM's is)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LayerName) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __fx_repr__(self):
        return f"LayerName({self.name!r})", {"LayerName": LayerName}


register_opaque_type(LayerName, typ="value")
SCALES = {"layers.0": 0.5, "layers.1": 2.0}


@torch.library.custom_op("opaque_layer::scaled", mutates_args=())
def scaled(x: torch.Tensor, scale: float, layer: LayerName) -> torch.Tensor:
    return x * SCALES[layer.name] * scale


@scaled.register_fake
def _(x, scale, layer):
    return torch.empty_like(x)


class Layer(torch.nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = LayerName(name)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        return scaled(self.proj(x), 1.5, self.name)


def build_model(device, dtype):
    return torch.nn.Sequential(Layer("layers.0"), Layer("layers.1")).to(device, dtype)


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
