"""A small Llama-style decode step built from the bundled aclcap ops, for `aclcap capture`
and `aclcap bench` (docs/contracts.md: the model file).

One step decodes one token for each of `size` sequences: vocab-parallel embedding masking
-> N x [rms_norm -> qkv -> rotary_embedding -> reshape_and_cache (each sequence's new key
and value into its slot of the paged KV cache) -> paged_attention over each sequence's
blocks -> o_proj -> fused_add_rms_norm -> MLP with silu_and_mul] -> final norm -> logits.
The KV caches are inputs that the step mutates in place, as vLLM's are; the block tables
and sequence lengths that address them are inputs too. vLLM's piecewise mode splits the
step at the attention op (SPLITTING_OPS).
"""

from __future__ import annotations

import torch
from torch import nn

import aclcap_ops
from aclcap_ops.samples import cos_sin_cache

aclcap_ops.load()  # builds if stale, then registers torch.ops.aclcap

OP_LIBRARIES = ["aclcap_ops"]
SHAPES = [1, 2, 4, 8]
LOGITS = True  # output is [tokens, vocab]: capture also reports token agreement and logprobs
SPLITTING_OPS = ["aclcap::paged_attention"]  # piecewise capture runs attention between pieces

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 4, 4, 2, 64
INTERMEDIATE, VOCAB = 512, 1024
BLOCKS, BLOCK_SIZE = 16, 16  # 256 cache slots; up to BLOCKS sequences, each in its own blocks
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

    def forward(self, hidden, residual, positions, slots, block_tables, seq_lens, k_cache,
                v_cache, rope):
        seqs = hidden.shape[0]  # one new token per sequence
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
        ops.reshape_and_cache(k.view(seqs, KV_HEADS, HEAD_DIM),
                              v.contiguous().view(seqs, KV_HEADS, HEAD_DIM), k_cache, v_cache,
                              slots)
        attn = ops.paged_attention(q.view(seqs, HEADS, HEAD_DIM), k_cache, v_cache,
                                   HEAD_DIM ** -0.5, block_tables, seq_lens)
        hidden = self.o_proj(attn.view(seqs, HEADS * HEAD_DIM))
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

    def forward(self, input_ids, positions, slot_mapping, block_tables, seq_lens, k_caches,
                v_caches):
        # One tensor-parallel rank that holds the whole vocab: masking keeps every id.
        ids, oob = ops.get_masked_input_and_mask(input_ids, 0, VOCAB, 0, VOCAB, VOCAB)
        hidden = self.embed(ids) * (~oob).unsqueeze(-1).to(self.embed.weight.dtype)
        residual = None
        for i, layer in enumerate(self.layers):
            hidden, residual = layer(hidden, residual, positions, slot_mapping, block_tables,
                                     seq_lens, k_caches[i], v_caches[i], self.rope)
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
    """One new token for each of `size` sequences, their earlier context already in the
    cache: each sequence owns BLOCKS // size blocks, handed out in random order as vLLM's
    allocator does, and is between half full and full (most of the cache is read, so that
    bench's floor, which counts the whole cache as read, stays close to what the step
    reads). Its new token sits at position seq_len - 1, in the slot the block table maps
    that position to."""
    if not 1 <= size <= BLOCKS:
        raise ValueError(f"tiny_llama holds 1 to {BLOCKS} sequences, got {size}")
    per_seq = BLOCKS // size
    blocks = torch.randperm(BLOCKS)[:size * per_seq].view(size, per_seq)
    block_tables = torch.cat([blocks, blocks[:, :1].expand(size, BLOCKS - per_seq)], dim=1)
    capacity = per_seq * BLOCK_SIZE
    seq_lens = torch.randint(capacity // 2 + 1, capacity + 1, (size,))
    positions = seq_lens - 1
    slot_mapping = blocks.gather(1, (positions // BLOCK_SIZE)[:, None])[:, 0] * BLOCK_SIZE \
        + positions % BLOCK_SIZE
    input_ids = torch.randint(0, VOCAB, (size,))
    cache_shape = (LAYERS, BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    k_caches = torch.randn(cache_shape, device=device, dtype=dtype)
    v_caches = torch.randn(cache_shape, device=device, dtype=dtype)
    return (input_ids.to(device), positions.to(device), slot_mapping.to(device),
            block_tables.to(device=device, dtype=torch.int32),
            seq_lens.to(device=device, dtype=torch.int32), k_caches, v_caches)
