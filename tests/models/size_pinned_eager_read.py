"""A step whose trace fails on a size constraint: it specializes the token count to a
constant (`if x.shape[0] == 8`), which aclcap's dynamic sizes refuse, beside a helper that
reads a tensor's values on the host only when not compiling (transformers' mask helpers):
the failure is the size constraint, never a host read the compiled step does not make."""
import torch


def _mask_helper(x):
    if not torch.compiler.is_compiling() and bool((x == 0).all()):  # eager only
        return x
    return x * 1


class Step(torch.nn.Module):
    def forward(self, x):
        x = _mask_helper(x)
        if x.shape[0] == 8:  # pins the token count: a size constraint, not a data read
            return x * 2
        return x + 1


def build_model(device, dtype):
    return Step()


def make_inputs(size, device, dtype):
    return (torch.randn(size, 8, device=device, dtype=dtype),)
