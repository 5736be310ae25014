"""The op library of view_op.py: an op declared `(Tensor(a) x) -> Tensor(a)` that
returns a view of its input: torch's functionalization refuses it, and its message ends
in the fix (clone, drop the alias)."""

import torch

import aclcap

_lib = torch.library.Library("aclcap_viewop", "DEF")
_lib.define("flat(Tensor(a) x) -> Tensor(a)")
_lib.impl("flat", lambda x: x.view(-1), "CPU")
torch.library.register_fake("aclcap_viewop::flat", lambda x: x.view(-1), lib=_lib)


@aclcap.samples("aclcap_viewop::flat")
def _(device, dtype):
    yield aclcap.SampleInput((torch.randn(3, 8, device=device, dtype=dtype),), {})

