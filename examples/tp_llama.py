"""tiny_llama sharded for tensor parallelism the way vLLM shards it, for
`aclcap capture examples/tp_llama.py --nproc 2` (and `aclcap bench ... --nproc 2`).

Each rank holds 1/N of every layer: a vocab-parallel embedding (get_masked_input_and_mask
maps the ids outside this rank's vocab shard to 0 and masks them; an all-reduce sums the
shards), column-parallel qkv (its share of the query and KV heads) and gate_up, row-parallel
o_proj and down, each followed by an all-reduce, and a column-parallel lm_head whose logits
are all-gathered. The weights are cut from one full model seeded alike on every rank, so
the N ranks together compute exactly what one unsharded model computes. aclcap initializes
the default process group before build_model (docs/contracts.md: the model file).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn

import aclcap_ops
from aclcap_ops.samples import cos_sin_cache

aclcap_ops.load()

OP_LIBRARIES = ["aclcap_ops"]
SHAPES = [1, 2, 4, 8]
LOGITS = True
REPLICATED_OUTPUTS = [0]  # the gathered logits: every rank must hold the same

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 2, 4, 2, 64
INTERMEDIATE, VOCAB = 512, 1024
BLOCKS, BLOCK_SIZE = 16, 16
EPS = 1e-6

ops = torch.ops.aclcap


def _world() -> tuple[int, int]:
    if not dist.is_initialized():
        raise RuntimeError("tp_llama needs a process group: run it with --nproc N")
    return dist.get_rank(), dist.get_world_size()


def _all_reduce(x: torch.Tensor) -> torch.Tensor:
    return funcol.all_reduce(x, "sum", dist.group.WORLD)


def _rows(weight: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's shard of a column-parallel weight [out, in]: a slice of the outputs."""
    return weight.chunk(world, dim=0)[rank].clone()


def _cols(weight: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's shard of a row-parallel weight [out, in]: a slice of the inputs."""
    return weight.chunk(world, dim=1)[rank].clone()


class Layer(nn.Module):
    def __init__(self, rank: int, world: int) -> None:
        super().__init__()
        self.heads, self.kv_heads = HEADS // world, KV_HEADS // world
        q, k, v = (torch.randn(n * HEAD_DIM, HIDDEN) * HIDDEN ** -0.5
                   for n in (HEADS, KV_HEADS, KV_HEADS))
        gate, up = (torch.randn(INTERMEDIATE, HIDDEN) * HIDDEN ** -0.5 for _ in range(2))
        o_proj = torch.randn(HIDDEN, HEADS * HEAD_DIM) * (HEADS * HEAD_DIM) ** -0.5
        down = torch.randn(HIDDEN, INTERMEDIATE) * INTERMEDIATE ** -0.5
        self.input_norm = nn.Parameter(torch.ones(HIDDEN))
        self.post_norm = nn.Parameter(torch.ones(HIDDEN))
        # Column-parallel: this rank's heads of q, k and v; its half of gate and of up.
        self.qkv = nn.Parameter(torch.cat([_rows(w, rank, world) for w in (q, k, v)]))
        self.gate_up = nn.Parameter(torch.cat([_rows(w, rank, world) for w in (gate, up)]))
        # Row-parallel: the inputs of this rank's heads / intermediate shard.
        self.o_proj = nn.Parameter(_cols(o_proj, rank, world))
        self.down = nn.Parameter(_cols(down, rank, world))

    def forward(self, hidden, residual, positions, slots, k_cache, v_cache, rope, mask):
        tokens = hidden.shape[0]
        if residual is None:
            residual = hidden
            x = ops.rms_norm(hidden, self.input_norm, EPS)
        else:
            ops.fused_add_rms_norm(hidden, residual, self.input_norm, EPS)
            x = hidden
        q, k, v = F.linear(x, self.qkv).split(
            [self.heads * HEAD_DIM, self.kv_heads * HEAD_DIM, self.kv_heads * HEAD_DIM], dim=-1)
        q, k = q.contiguous(), k.contiguous()
        ops.rotary_embedding(positions, q, k, HEAD_DIM, rope, True)
        ops.reshape_and_cache(k.view(tokens, self.kv_heads, HEAD_DIM),
                              v.contiguous().view(tokens, self.kv_heads, HEAD_DIM), k_cache,
                              v_cache, slots)
        keys = k_cache.view(-1, self.kv_heads, HEAD_DIM).transpose(0, 1)
        values = v_cache.view(-1, self.kv_heads, HEAD_DIM).transpose(0, 1)
        attn = F.scaled_dot_product_attention(
            q.view(tokens, self.heads, HEAD_DIM).transpose(0, 1), keys, values,
            attn_mask=mask, enable_gqa=True)
        hidden = _all_reduce(F.linear(attn.transpose(0, 1).reshape(tokens, -1), self.o_proj))
        ops.fused_add_rms_norm(hidden, residual, self.post_norm, EPS)
        hidden = _all_reduce(F.linear(ops.silu_and_mul(F.linear(hidden, self.gate_up)),
                                      self.down))
        return hidden, residual


class TPLlama(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        rank, world = _world()
        if HEADS % world or KV_HEADS % world or VOCAB % world or INTERMEDIATE % world:
            raise ValueError(f"tp_llama shards {KV_HEADS} KV heads: use --nproc 1 or 2")
        shard, self.world = VOCAB // world, world
        self.vocab_start, self.vocab_end = rank * shard, (rank + 1) * shard
        embed = torch.randn(VOCAB, HIDDEN)
        self.embed = nn.Parameter(embed[self.vocab_start:self.vocab_end].clone())
        self.layers = nn.ModuleList(Layer(rank, world) for _ in range(LAYERS))
        self.norm = nn.Parameter(torch.ones(HIDDEN))
        self.lm_head = nn.Parameter(_rows(torch.randn(VOCAB, HIDDEN) * HIDDEN ** -0.5, rank,
                                          world))
        self.register_buffer("rope", cos_sin_cache(BLOCKS * BLOCK_SIZE, HEAD_DIM, "cpu",
                                                   torch.float32), persistent=False)

    def forward(self, input_ids, positions, slot_mapping, k_caches, v_caches):
        # Vocab-parallel embedding: ids of other ranks' shards look up row 0, masked out.
        ids, oob = ops.get_masked_input_and_mask(input_ids, self.vocab_start, self.vocab_end,
                                                 0, VOCAB, VOCAB)
        hidden = _all_reduce(F.embedding(ids, self.embed)
                             * (~oob).unsqueeze(-1).to(self.embed.dtype))
        slots = torch.arange(BLOCKS * BLOCK_SIZE, device=positions.device)
        mask = slots[None, :] <= positions[:, None]
        residual = None
        for i, layer in enumerate(self.layers):
            hidden, residual = layer(hidden, residual, positions, slot_mapping, k_caches[i],
                                     v_caches[i], self.rope, mask)
        ops.fused_add_rms_norm(hidden, residual, self.norm, EPS)
        # Column-parallel lm_head: this rank's vocab shard of the logits, gathered along the
        # token dim (what the collective does natively) and laid out as [tokens, vocab].
        shard = F.linear(hidden, self.lm_head)
        gathered = funcol.all_gather_single(shard, 0, dist.group.WORLD)
        return gathered.view(self.world, *shard.shape).permute(1, 0, 2).reshape(shard.shape[0], -1)


def build_model(device: torch.device, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)  # the same full weights on every rank, then each keeps its shard
    return TPLlama().to(device=device, dtype=dtype).eval()


def make_inputs(size: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """The same ids and positions on every rank (aclcap seeds each call alike); each
    rank's KV caches hold its own KV heads."""
    _, world = _world()
    start = int(torch.randint(0, BLOCKS * BLOCK_SIZE - size + 1, ()))
    positions = torch.arange(start, start + size, device=device)
    input_ids = torch.randint(0, VOCAB, (size,), device=device)
    cache_shape = (LAYERS, BLOCKS, BLOCK_SIZE, KV_HEADS // world, HEAD_DIM)
    k_caches = torch.randn(cache_shape, device=device, dtype=dtype)
    v_caches = torch.randn(cache_shape, device=device, dtype=dtype)
    return input_ids, positions, positions.clone(), k_caches, v_caches
