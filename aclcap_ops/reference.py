"""Plain-PyTorch references of the bundled ops: the ground truth for the kernel tests and
the "eager composite" baseline of the benchmarks. They compute in float32, as the kernels do."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(input: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = input.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(input.dtype)


def fused_add_rms_norm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    residual.copy_((input.float() + residual.float()).to(residual.dtype))
    input.copy_(rms_norm(residual, weight, eps))


def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> None:
    rot = cos_sin_cache.shape[1]
    half = rot // 2
    cos_sin = cos_sin_cache[positions.reshape(-1).long()].float()
    cos, sin = cos_sin[:, None, :half], cos_sin[:, None, half:]
    for t in (query, key):
        heads = t.view(t.shape[0], -1, head_size)
        r = heads[..., :rot].float()
        if is_neox:
            x, y = r[..., :half], r[..., half:]
            out = torch.cat((x * cos - y * sin, y * cos + x * sin), dim=-1)
        else:
            x, y = r[..., 0::2], r[..., 1::2]
            out = torch.stack((x * cos - y * sin, y * cos + x * sin), dim=-1).flatten(-2)
        heads[..., :rot] = out.to(t.dtype)


def silu_and_mul(input: torch.Tensor) -> torch.Tensor:
    d = input.shape[-1] // 2
    return (F.silu(input[..., :d].float()) * input[..., d:].float()).to(input.dtype)


def get_masked_input_and_mask(
    input: torch.Tensor,
    org_vocab_start_index: int,
    org_vocab_end_index: int,
    num_org_vocab_padding: int,
    added_vocab_start_index: int,
    added_vocab_end_index: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    in_org = (input >= org_vocab_start_index) & (input < org_vocab_end_index)
    in_added = (input >= added_vocab_start_index) & (input < added_vocab_end_index)
    org_size = org_vocab_end_index - org_vocab_start_index
    added_offset = added_vocab_start_index - org_size - num_org_vocab_padding
    offset = org_vocab_start_index * in_org + added_offset * in_added
    valid = in_org | in_added
    return (valid * (input - offset)).to(input.dtype), ~valid


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    key_cache.view(-1, *key.shape[1:])[slots] = key[keep]
    value_cache.view(-1, *value.shape[1:])[slots] = value[keep]


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    scale: float,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
) -> torch.Tensor:
    """Every sequence gathers all its max_blocks blocks and masks the tokens past its length:
    no size depends on seq_lens' values, so the reference captures in a device graph too."""
    num_seqs, num_heads, dim = query.shape
    num_blocks, _, num_kv_heads, _ = key_cache.shape
    # Table entries past a sequence's length may be anything: they are masked, but must index.
    blocks = block_tables.long().clamp(0, num_blocks - 1)
    keys = key_cache[blocks].reshape(num_seqs, -1, num_kv_heads, dim).float()
    values = value_cache[blocks].reshape(num_seqs, -1, num_kv_heads, dim).float()
    group = num_heads // num_kv_heads
    keys, values = (t.repeat_interleave(group, dim=2) for t in (keys, values))
    logits = torch.einsum("shd,sthd->sht", query.float(), keys) * scale
    valid = torch.arange(keys.shape[1], device=query.device) < seq_lens[:, None]
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    # An empty sequence attends to nothing: zeros, not the NaN of a softmax over no tokens.
    probs = torch.softmax(logits, dim=-1).nan_to_num(0.0)
    return torch.einsum("sht,sthd->shd", probs, values).to(query.dtype)
