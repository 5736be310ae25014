"""A model on the synthesis fixture ops (tests/fixtures/synth_ops.py), as a quantized model
is built and run: the weight is quantized at load time by custom ops (block_scales,
pack_int4: build-time calls, outside any step), and each step dequantizes it with an op
whose output shape and dtype are arguments, quantizes the activations per token and
statically (an out= variant), and normalizes by row statistics. The library has no meta
impls: `aclcap check-meta --samples-from` this file harvests real calls of each, the
build-time ones included, for synthesis.
"""

from pathlib import Path

import torch
from torch import nn

OP_LIBRARIES = [str(Path(__file__).parents[1] / "fixtures" / "synth_ops.py")]
HIDDEN, BLOCK = 64, 32
ops = torch.ops.aclcap_synth


class SynthModel(nn.Module):
    def __init__(self, device: torch.device) -> None:
        super().__init__()
        w = torch.randn(HIDDEN, HIDDEN, device=device) * 0.1
        scales = ops.block_scales(w, BLOCK)  # build-time: one scale per block of the weight
        q = (w.reshape(-1, BLOCK) / scales[:, None]).reshape(HIDDEN, HIDDEN)
        self.register_buffer("packed", ops.pack_int4(q))  # build-time: the 4-bit packing
        self.register_buffer("scales", scales)
        self.register_buffer("in_scale", torch.tensor(0.05, device=device))
        self.bias = nn.Parameter(torch.randn(HIDDEN, device=device) * 0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Quantized straight from the input, so eager and graph round the same values.
        q, token_scales = ops.dynamic_quant(x, 0.0)
        static = x.new_empty(x.shape, dtype=torch.int8)
        ops.quant_int8.out(x, self.in_scale, out=static)
        xq = (q.float() * token_scales + static.float() * self.in_scale) * 0.5
        w = ops.dequant_int4(self.packed, self.scales, BLOCK, [HIDDEN, HIDDEN], x.dtype)
        h = ops.fast_gelu(xq.to(x.dtype) @ w.t())
        h = ops.add_bias(h, self.bias).to(x.dtype)  # a float32 bias promotes
        return h / ops.row_rms(h)[:, None].to(x.dtype)


def build_model(device, dtype):
    torch.manual_seed(0)
    # The buffers stay as packed (uint8) and float32 scales whatever the step's dtype.
    return SynthModel(torch.device(device)).eval()


def make_inputs(size, device, dtype):
    return (torch.randn(size, HIDDEN, device=device, dtype=dtype),)
