"""A model calling an op declared `(Tensor(a) x) -> Tensor(a)` that returns a view
(view_op_lib.py)."""

import torch

OP_LIBRARIES = ["view_op_lib.py"]


class Flat(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aclcap_viewop.flat(x) * 2


def build_model(device, dtype):
    return Flat()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
