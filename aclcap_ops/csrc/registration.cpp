// The dispatcher surface of the bundled library: schemas, CPU kernels, and the one meta
// kernels that live in C++ (silu_and_mul and the out= variants); the others are Python
// fakes in aclcap_ops/meta.py.
#include <torch/library.h>

#include "ops.h"

TORCH_LIBRARY(aclcap, m) {
  m.def("rms_norm(Tensor input, Tensor weight, float eps) -> Tensor");
  // out= variants, as vLLM's schemas take preallocated outputs (a large output allocated
  // per call pays fresh pages, page faults, every time). They return () as vLLM's do:
  // functionalization does not support a custom op whose output aliases an input.
  m.def("rms_norm.out(Tensor input, Tensor weight, float eps, *, Tensor(a!) out) -> ()");
  m.def(
      "fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, float eps) -> "
      "()");
  m.def(
      "rotary_embedding(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, "
      "Tensor cos_sin_cache, bool is_neox) -> ()");
  m.def("silu_and_mul(Tensor input) -> Tensor");
  m.def("silu_and_mul.out(Tensor input, *, Tensor(a!) out) -> ()");
  m.def(
      "get_masked_input_and_mask(Tensor input, int org_vocab_start_index, int "
      "org_vocab_end_index, int num_org_vocab_padding, int added_vocab_start_index, int "
      "added_vocab_end_index) -> (Tensor, Tensor)");
  m.def(
      "reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) "
      "value_cache, Tensor slot_mapping) -> ()");
  // vLLM's paged_attention_v1 argument order, less what the tensors already say (out, which
  // is returned instead; num_kv_heads, block_size, max_seq_len) and what it does not do
  // (alibi, quantized caches, block sparsity). Tagged cudagraph_unsafe as vLLM's piecewise
  // runtime treats attention: a split point, run eagerly between the captured pieces.
  m.def(
      "paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, float scale, "
      "Tensor block_tables, Tensor seq_lens) -> Tensor",
      {at::Tag::cudagraph_unsafe});
}

TORCH_LIBRARY_IMPL(aclcap, CPU, m) {
  m.impl("rms_norm", TORCH_FN(aclcap::rms_norm));
  m.impl("rms_norm.out", TORCH_FN(aclcap::rms_norm_out));
  m.impl("fused_add_rms_norm", TORCH_FN(aclcap::fused_add_rms_norm));
  m.impl("rotary_embedding", TORCH_FN(aclcap::rotary_embedding));
  m.impl("silu_and_mul", TORCH_FN(aclcap::silu_and_mul));
  m.impl("silu_and_mul.out", TORCH_FN(aclcap::silu_and_mul_out));
  m.impl("get_masked_input_and_mask", TORCH_FN(aclcap::get_masked_input_and_mask));
  m.impl("reshape_and_cache", TORCH_FN(aclcap::reshape_and_cache));
  m.impl("paged_attention", TORCH_FN(aclcap::paged_attention));
}

// ACLCAP_NO_META builds the kernels without these (aclcap_ops.nometa, build/cpu-nometa/):
// the library as one that ships no meta impls, for tests that synthesize them.
#ifndef ACLCAP_NO_META
TORCH_LIBRARY_IMPL(aclcap, Meta, m) {
  m.impl("silu_and_mul", TORCH_FN(aclcap::silu_and_mul_meta));
  m.impl("rms_norm.out", TORCH_FN(aclcap::rms_norm_out_meta));
  m.impl("silu_and_mul.out", TORCH_FN(aclcap::silu_and_mul_out_meta));
}
#endif
