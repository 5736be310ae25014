"""Two custom ops on one model line, `a(x) + b(x)`; only `a` has a fake, so tracing fails
in `b`: the failure must name `b`, not the first op on the line."""

import torch


@torch.library.custom_op("aclcap_twoops::a", mutates_args=())
def a(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@torch.library.custom_op("aclcap_twoops::b", mutates_args=())
def b(x: torch.Tensor) -> torch.Tensor:
    return x * 2


a.register_fake(lambda x: torch.empty_like(x))


class TwoOps(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aclcap_twoops.a(x) + torch.ops.aclcap_twoops.b(x)


def build_model(device, dtype):
    return TwoOps()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
