"""A small Llama-style decoder step built from the bundled aclcap ops, for `aclcap capture`
and `aclcap bench` (the README's model-file contract).

One step: vocab-parallel embedding masking -> N x [rms_norm -> qkv -> rotary_embedding ->
reshape_and_cache into a static paged KV cache -> attention over the cache (SDPA) -> o_proj
-> fused_add_rms_norm -> MLP with silu_and_mul] -> final norm -> logits. The KV caches are
inputs that the step mutates in place, as vLLM's are.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import aclcap_ops
from aclcap_ops.samples import cos_sin_cache

aclcap_ops.load()  # builds if stale, then registers torch.ops.aclcap

OP_LIBRARIES = ["aclcap_ops"]
SHAPES = [1, 2, 4, 8]
LOGITS = True  # output is [tokens, vocab]: capture also reports token agreement and logprobs

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 4, 4, 2, 64
INTERMEDIATE, VOCAB = 512, 1024
BLOCKS, BLOCK_SIZE = 16, 16  # 256 cache slots
EPS = 1e-6

ops = torch.ops.aclcap


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.input_norm = nn.Parameter(torch.ones(HIDDEN) + 0.1 * torch.randn(HIDDEN))
        self.qkv = nn.Linear(HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.post_norm = nn.Parameter(torch.ones(HIDDEN) + 0.1 * torch.randn(HIDDEN))
        self.gate_up = nn.Linear(HIDDEN, 2 * INTERMEDIATE, bias=False)
        self.down = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, hidden, residual, positions, slots, k_cache, v_cache, rope, mask):
        tokens = hidden.shape[0]
        if residual is None:
            residual = hidden
            x = ops.rms_norm(hidden, self.input_norm, EPS)
        else:
            ops.fused_add_rms_norm(hidden, residual, self.input_norm, EPS)
            x = hidden
        q, k, v = self.qkv(x).split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM],
                                    dim=-1)
        q, k = q.contiguous(), k.contiguous()
        ops.rotary_embedding(positions, q, k, HEAD_DIM, rope, True)
        ops.reshape_and_cache(k.view(tokens, KV_HEADS, HEAD_DIM),
                              v.contiguous().view(tokens, KV_HEADS, HEAD_DIM), k_cache, v_cache,
                              slots)
        keys = k_cache.view(-1, KV_HEADS, HEAD_DIM).transpose(0, 1)  # [kv_heads, slots, dim]
        values = v_cache.view(-1, KV_HEADS, HEAD_DIM).transpose(0, 1)
        attn = F.scaled_dot_product_attention(
            q.view(tokens, HEADS, HEAD_DIM).transpose(0, 1), keys, values, attn_mask=mask,
            enable_gqa=True)
        hidden = self.o_proj(attn.transpose(0, 1).reshape(tokens, HEADS * HEAD_DIM))
        ops.fused_add_rms_norm(hidden, residual, self.post_norm, EPS)
        hidden = self.down(ops.silu_and_mul(self.gate_up(hidden)))
        return hidden, residual


class TinyLlama(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = nn.Parameter(torch.ones(HIDDEN))
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        self.register_buffer("rope", cos_sin_cache(BLOCKS * BLOCK_SIZE, HEAD_DIM, "cpu",
                                                   torch.float32), persistent=False)

    def forward(self, input_ids, positions, slot_mapping, k_caches, v_caches):
        # One tensor-parallel rank that holds the whole vocab: masking keeps every id.
        ids, oob = ops.get_masked_input_and_mask(input_ids, 0, VOCAB, 0, VOCAB, VOCAB)
        hidden = self.embed(ids) * (~oob).unsqueeze(-1).to(self.embed.weight.dtype)
        # Token t sees the cache slots up to its own position (one sequence, slot = position).
        slots = torch.arange(BLOCKS * BLOCK_SIZE, device=positions.device)
        mask = slots[None, :] <= positions[:, None]
        residual = None
        for i, layer in enumerate(self.layers):
            hidden, residual = layer(hidden, residual, positions, slot_mapping, k_caches[i],
                                     v_caches[i], self.rope, mask)
        ops.fused_add_rms_norm(hidden, residual, self.norm, EPS)
        return self.lm_head(hidden)


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    model = TinyLlama()
    for p in model.parameters():  # keep activations O(1) through the layers
        if p.dim() == 2:
            nn.init.normal_(p, std=p.shape[1] ** -0.5)
    return model.to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """`size` consecutive tokens of one sequence, its earlier context already in the cache."""
    start = int(torch.randint(0, BLOCKS * BLOCK_SIZE - size + 1, ()))
    positions = torch.arange(start, start + size, device=device)
    input_ids = torch.randint(0, VOCAB, (size,), device=device)
    cache_shape = (LAYERS, BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    k_caches = torch.randn(cache_shape, device=device, dtype=dtype)
    v_caches = torch.randn(cache_shape, device=device, dtype=dtype)
    return input_ids, positions, positions.clone(), k_caches, v_caches
