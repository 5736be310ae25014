"""Python fake (meta) impls of the bundled ops, in one module as vllm-ascend's
meta_registration.py keeps them. silu_and_mul's meta kernel is in C++ (csrc/activation.cpp).
Each fake only computes output shapes and dtypes, with symbolic sizes left symbolic."""

from __future__ import annotations

import torch


@torch.library.register_fake("aclcap::rms_norm")
def _rms_norm(input: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return input.new_empty(input.shape)


@torch.library.register_fake("aclcap::fused_add_rms_norm")
def _fused_add_rms_norm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> None:
    return None


@torch.library.register_fake("aclcap::rotary_embedding")
def _rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> None:
    return None


@torch.library.register_fake("aclcap::get_masked_input_and_mask")
def _get_masked_input_and_mask(
    input: torch.Tensor,
    org_vocab_start_index: int,
    org_vocab_end_index: int,
    num_org_vocab_padding: int,
    added_vocab_start_index: int,
    added_vocab_end_index: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    return input.new_empty(input.shape), input.new_empty(input.shape, dtype=torch.bool)


@torch.library.register_fake("aclcap::reshape_and_cache")
def _reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    return None


@torch.library.register_fake("aclcap::paged_attention")
def _paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    scale: float,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
) -> torch.Tensor:
    return query.new_empty(query.shape)
