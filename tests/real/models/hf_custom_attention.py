"""A tiny random transformers Llama whose attention is a custom op, the way vLLM and
vllm-ascend plug their attention kernels in: transformers' attention-interface registry
lets the model call `corpus::attention`, and piecewise capture splits the step there
(SPLITTING_OPS), running attention eagerly between the graph pieces."""

from __future__ import annotations

import torch
from hf_decoder import step_for
from transformers import AttentionInterface

SHAPES = [1, 2, 4]
LOGITS = True
SPLITTING_OPS = ["corpus::attention"]


@torch.library.custom_op("corpus::attention", mutates_args=())
def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              scale: float) -> torch.Tensor:
    """Causal attention over one sequence's tokens, grouped KV heads: [b, heads, q, d] ->
    [b, q, heads, d], the layout transformers' attention functions return."""
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=True, scale=scale, enable_gqa=True)
    return out.transpose(1, 2).contiguous()


@attention.register_fake
def _(query, key, value, scale):
    b, heads, q, d = query.shape
    return query.new_empty(b, q, heads, d)


def corpus_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                     **kwargs):
    """transformers' attention-function signature; the mask is causal (one sequence, no
    cache), so the op needs none."""
    return attention(query, key, value, scaling), None


AttentionInterface.register("corpus_attention", corpus_attention)
build_model, make_inputs = step_for("llama", attn_implementation="corpus_attention")
