"""A step whose op's kernel crashes the process when the compiled graph calls it (from
C++, with no Python frame of the step above it), as a kernel that reads a freed pointer
crashes in replay only: eager runs pass, the replay kills the process. capture must end
with one line naming the phase, exit 1, not a bare "Segmentation fault"."""
import ctypes
import sys

import torch


def _called_by_the_step() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == __file__ and frame.f_code.co_name == "forward":
            return True
        frame = frame.f_back
    return False


@torch.library.custom_op("replaycrash::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    if not _called_by_the_step():
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    return x * 2


@double.register_fake
def _(x):
    return torch.empty_like(x)


class Step(torch.nn.Module):
    def forward(self, x):
        return double(x + 1)


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
