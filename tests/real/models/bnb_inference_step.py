"""A bitsandbytes-quantized MLP block on the CPU, as QLoRA and LLM.int8() inference run one,
through bnb's public API only. Weights are quantized once at build (build-time calls of bnb's
ops): `up` nf4 with nested (8-bit) absmax, `gate` fp4, `down` int8 row-wise. A step runs the
4-bit matmuls, an 8-bit blockwise round trip of the activations (an 8-bit KV cache), the
LLM.int8() matmul with outlier decomposition (threshold 6, one input feature an outlier
column, as LLM.int8() finds in real models) and without it, and the int8 matmul by parts.

The ops taken here must not depend on the CPU's ISA: `gemv_4bit` is left out (its CPU kernel
wants AVX512-BF16 and weights repacked for it), so every machine records the same ops."""

from __future__ import annotations

import bitsandbytes as bnb
import bitsandbytes.functional as F
import torch
from bitsandbytes.autograd._functions import MatmulLtState
from torch import nn

SHAPES = [1, 3]
HIDDEN, INTER = 64, 128
OUTLIER_FEATURE = 5  # the input feature LLM.int8()'s threshold finds


def _int8_state(weight: torch.Tensor, threshold: float) -> MatmulLtState:
    """An inference state as bnb.nn.Linear8bitLt holds one: weights quantized, no fp16 copy."""
    state = MatmulLtState()
    state.CB, state.SCB, _ = F.int8_vectorwise_quant(weight.to(torch.float16))
    state.threshold, state.has_fp16_weights, state.is_training = threshold, False, False
    return state


class QuantizedMLP(nn.Module):
    def __init__(self, up: torch.Tensor, gate: torch.Tensor, down: torch.Tensor) -> None:
        super().__init__()
        self.up_q, self.up_state = F.quantize_4bit(up, blocksize=64, quant_type="nf4",
                                                   compress_statistics=True)
        self.gate_q, self.gate_state = F.quantize_4bit(gate, blocksize=64, quant_type="fp4")
        self.down = down.to(torch.float16)  # the int8 states' weight, as bnb's layer keeps it
        self.outliers = _int8_state(down, threshold=6.0)
        self.plain = _int8_state(down, threshold=0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = bnb.matmul_4bit(x, self.up_q.t(), self.up_state)
        gate = bnb.matmul_4bit(x, self.gate_q.t(), self.gate_state)
        h = torch.relu(gate) * up
        q, kv_state = F.quantize_blockwise(h, blocksize=64)
        h = F.dequantize_blockwise(q, kv_state)
        h[:, OUTLIER_FEATURE] += 8.0
        h16 = h.to(torch.float16)  # LLM.int8() quantizes float16 activations
        y = bnb.matmul(h16, self.down, state=self.outliers).to(x.dtype)
        y = y + bnb.matmul(h16, self.down, state=self.plain).to(x.dtype)
        hq, h_stats, _ = F.int8_vectorwise_quant(h)
        acc = F.int8_linear_matmul(hq, self.plain.CB)
        y = y + F.int8_mm_dequant(acc, h_stats, self.plain.SCB).to(x.dtype)
        gate_w = F.dequantize_4bit(self.gate_q, self.gate_state)  # [INTER, HIDDEN]
        return y + F.int8_vectorwise_dequant(hq, h_stats) @ gate_w


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)  # the same weights in every process that builds it
    up = torch.randn(INTER, HIDDEN, device=device, dtype=dtype) / HIDDEN**0.5
    gate = torch.randn(INTER, HIDDEN, device=device, dtype=dtype) / HIDDEN**0.5
    down = torch.randn(HIDDEN, INTER, device=device, dtype=dtype) / INTER**0.5
    return QuantizedMLP(up, gate, down).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple:
    return (torch.randn(size, HIDDEN, device=device, dtype=dtype),)
