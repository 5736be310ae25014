"""A step calling two libraries' ops, both `torch.library.custom_op`s without a fake: the
trace fails whole at the first, and the advice must name both libraries, not send the user
back for the second after fixing the first (issue 50)."""
import torch


@torch.library.custom_op("fakelessa::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@torch.library.custom_op("fakelessb::shift", mutates_args=())
def shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1


class Step(torch.nn.Module):
    def forward(self, x):
        return shift(scale(x))


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
