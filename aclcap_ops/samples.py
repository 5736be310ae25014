"""Sample inputs of the bundled ops for check-meta: several shapes each, including sizes that
are not a multiple of the vector width so the kernels' scalar tails run too."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from aclcap import SampleInput, samples

TOKENS = (1, 5, 33)


def cos_sin_cache(max_pos: int, rot_dim: int, device, dtype) -> torch.Tensor:
    """A standard RoPE table [max_pos, rot_dim]: cos in the first half, sin in the second."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rot_dim, 2, dtype=torch.float32) / rot_dim))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(device=device, dtype=dtype)


@samples("aclcap::rms_norm")
def _rms_norm(device, dtype) -> Iterator[SampleInput]:
    for tokens, hidden in zip(TOKENS, (64, 100, 256), strict=True):
        x = torch.randn(tokens, hidden, device=device, dtype=dtype)
        yield SampleInput((x, torch.randn(hidden, device=device, dtype=dtype), 1e-6))


@samples("aclcap::rms_norm.out")
def _rms_norm_out(device, dtype) -> Iterator[SampleInput]:
    for sample in _rms_norm(device, dtype):
        yield SampleInput(sample.args, {"out": torch.empty_like(sample.args[0])})


@samples("aclcap::fused_add_rms_norm")
def _fused_add_rms_norm(device, dtype) -> Iterator[SampleInput]:
    for tokens, hidden in zip(TOKENS, (64, 100, 256), strict=True):
        x = torch.randn(tokens, hidden, device=device, dtype=dtype)
        residual = torch.randn_like(x)
        yield SampleInput((x, residual, torch.randn(hidden, device=device, dtype=dtype), 1e-5))


@samples("aclcap::rotary_embedding")
def _rotary_embedding(device, dtype) -> Iterator[SampleInput]:
    max_pos = 64
    shapes = ((4, 2, 64, 64), (2, 1, 32, 16), (8, 8, 128, 128))
    for tokens, (q_heads, k_heads, head_size, rot_dim), is_neox in zip(
        TOKENS, shapes, (True, False, True), strict=True
    ):
        # Position 0 rotates by nothing: start at 1 so every sample writes query and key.
        positions = torch.randint(1, max_pos, (tokens,), device=device)
        query = torch.randn(tokens, q_heads * head_size, device=device, dtype=dtype)
        key = torch.randn(tokens, k_heads * head_size, device=device, dtype=dtype)
        table = cos_sin_cache(max_pos, rot_dim, device, dtype)
        yield SampleInput((positions, query, key, head_size, table, is_neox))


@samples("aclcap::silu_and_mul")
def _silu_and_mul(device, dtype) -> Iterator[SampleInput]:
    for tokens, d in zip(TOKENS, (64, 50, 256), strict=True):
        yield SampleInput((torch.randn(tokens, 2 * d, device=device, dtype=dtype),))


@samples("aclcap::silu_and_mul.out")
def _silu_and_mul_out(device, dtype) -> Iterator[SampleInput]:
    for sample in _silu_and_mul(device, dtype):
        x = sample.args[0]
        yield SampleInput((x,), {"out": x.new_empty(*x.shape[:-1], x.shape[-1] // 2)})


@samples("aclcap::get_masked_input_and_mask")
def _get_masked_input_and_mask(device, dtype) -> Iterator[SampleInput]:
    # A rank holding original ids [100, 200) and added ids [1000, 1010), padded by 4.
    for tokens, index_dtype in zip(TOKENS, (torch.int64, torch.int32, torch.int64), strict=True):
        ids = torch.randint(0, 1100, (tokens,), device=device, dtype=index_dtype)
        yield SampleInput((ids, 100, 200, 4, 1000, 1010))


@samples("aclcap::reshape_and_cache")
def _reshape_and_cache(device, dtype) -> Iterator[SampleInput]:
    shapes = ((4, 16, 2, 64), (2, 8, 1, 32), (8, 16, 4, 64))
    for tokens, (blocks, block_size, heads, head_size) in zip(TOKENS, shapes, strict=True):
        key = torch.randn(tokens, heads, head_size, device=device, dtype=dtype)
        value = torch.randn_like(key)
        key_cache = torch.zeros(blocks, block_size, heads, head_size, device=device, dtype=dtype)
        value_cache = torch.zeros_like(key_cache)
        slots = torch.randperm(blocks * block_size, device=device)[:tokens]
        if tokens > 1:
            slots[-1] = -1  # a padded token: its slot is skipped
        yield SampleInput((key, value, key_cache, value_cache, slots))


def paged_kv_cache(seq_lens: list[int], num_kv_heads: int, head_dim: int, block_size: int,
                   device, dtype) -> tuple[torch.Tensor, ...]:
    """A random paged KV cache holding `seq_lens` tokens per sequence, each sequence in
    blocks of its own handed out in random order (as vLLM's block allocator does), and
    the block tables and lengths that address it: (key_cache, value_cache, block_tables,
    seq_lens). Each table has one spare entry past the longest sequence's blocks, pointing
    at an unused block, so a kernel reading past a length reads the wrong values."""
    need = [-(-n // block_size) for n in seq_lens]
    max_blocks = max(need) + 1
    num_blocks = sum(need) + 1
    order = torch.randperm(num_blocks).tolist()
    spare = order.pop()
    tables = torch.full((len(seq_lens), max_blocks), spare, dtype=torch.int32)
    for s, n in enumerate(need):
        tables[s, :n] = torch.tensor([order.pop() for _ in range(n)], dtype=torch.int32)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    key_cache = torch.randn(shape, device=device, dtype=dtype)
    value_cache = torch.randn(shape, device=device, dtype=dtype)
    return (key_cache, value_cache, tables.to(device),
            torch.tensor(seq_lens, dtype=torch.int32, device=device))


@samples("aclcap::paged_attention")
def _paged_attention(device, dtype) -> Iterator[SampleInput]:
    # (seq_lens, num_heads, num_kv_heads, head_dim, block_size): one sequence, as many
    # heads as KV heads, a length not a multiple of the block; GQA with a length of 1 and
    # one of exactly two blocks; multi-query attention with a head_dim off the vector width.
    cases = (([37], 4, 4, 64, 16), ([1, 16, 9, 40, 5], 8, 2, 32, 8), ([3, 70, 21], 4, 1, 80, 16))
    for seq_lens, heads, kv_heads, head_dim, block_size in cases:
        query = torch.randn(len(seq_lens), heads, head_dim, device=device, dtype=dtype)
        cache = paged_kv_cache(seq_lens, kv_heads, head_dim, block_size, device, dtype)
        yield SampleInput((query, *cache[:2], head_dim ** -0.5, *cache[2:]))
